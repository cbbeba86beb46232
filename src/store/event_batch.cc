#include "store/event_batch.h"

#include "store/sqlite_util.h"

namespace gw {

namespace {

// The optional arguments after duration_ns, in column order.
constexpr int64_t Event::*kOptionalColumns[] = {
    &Event::ret,     &Event::bytes, &Event::kind,    &Event::cpu,     &Event::other_pid,
    &Event::runq_ns, &Event::addr,  &Event::name_id, &Event::stack_id, &Event::waker_pid,
    &Event::waker_tid};
constexpr int kFirstOptionalColumn = 7;

struct BatchTable {
  sqlite3_vtab base;  // first: SQLite sees a sqlite3_vtab*
  const EventBatch* batch;
};

struct BatchCursor {
  sqlite3_vtab_cursor base;  // first: SQLite sees a sqlite3_vtab_cursor*
  const EventBatch* batch;
  size_t pos;
};

int Connect(sqlite3* db, void* aux, int, const char* const*, sqlite3_vtab** out, char**) {
  int rc = sqlite3_declare_vtab(db,
                                "CREATE TABLE x(session, ts, seq, pid, tid, op, duration_ns, ret, "
                                "bytes, kind, cpu, other_pid, runq_ns, addr, name_id, stack_id, "
                                "waker_pid, waker_tid)");
  if (rc != SQLITE_OK) return rc;
  auto* table = new BatchTable{};
  table->batch = static_cast<const EventBatch*>(aux);
  *out = &table->base;
  return SQLITE_OK;
}

int Disconnect(sqlite3_vtab* vtab) {
  delete reinterpret_cast<BatchTable*>(vtab);
  return SQLITE_OK;
}

int BestIndex(sqlite3_vtab*, sqlite3_index_info* info) {
  info->estimatedCost = 1e6;  // a full scan is the only plan
  return SQLITE_OK;
}

int Open(sqlite3_vtab* vtab, sqlite3_vtab_cursor** out) {
  auto* cursor = new BatchCursor{};
  cursor->batch = reinterpret_cast<BatchTable*>(vtab)->batch;
  *out = &cursor->base;
  return SQLITE_OK;
}

int Close(sqlite3_vtab_cursor* cursor) {
  delete reinterpret_cast<BatchCursor*>(cursor);
  return SQLITE_OK;
}

int Filter(sqlite3_vtab_cursor* cursor, int, const char*, int, sqlite3_value**) {
  reinterpret_cast<BatchCursor*>(cursor)->pos = 0;
  return SQLITE_OK;
}

int Next(sqlite3_vtab_cursor* cursor) {
  ++reinterpret_cast<BatchCursor*>(cursor)->pos;
  return SQLITE_OK;
}

int Eof(sqlite3_vtab_cursor* cursor) {
  auto* c = reinterpret_cast<BatchCursor*>(cursor);
  return c->pos >= c->batch->count;
}

int Column(sqlite3_vtab_cursor* cursor, sqlite3_context* ctx, int column) {
  auto* c = reinterpret_cast<BatchCursor*>(cursor);
  const BatchRow& row = c->batch->rows[c->pos];
  const Event& e = c->batch->events[row.index];
  int64_t value = kNull;
  switch (column) {
    case 0: value = c->batch->session; break;
    case 1: value = row.ts; break;
    case 2: value = row.seq; break;
    case 3: value = e.pid; break;
    case 4: value = e.tid; break;
    case 5: value = static_cast<int64_t>(e.op); break;
    case 6: value = e.duration_ns; break;
    default: value = e.*kOptionalColumns[column - kFirstOptionalColumn]; break;
  }
  if (value == kNull) {
    sqlite3_result_null(ctx);
  } else {
    sqlite3_result_int64(ctx, value);
  }
  return SQLITE_OK;
}

int Rowid(sqlite3_vtab_cursor* cursor, sqlite3_int64* rowid) {
  *rowid = static_cast<sqlite3_int64>(reinterpret_cast<BatchCursor*>(cursor)->pos);
  return SQLITE_OK;
}

const sqlite3_module* Module() {
  static const sqlite3_module module = [] {
    sqlite3_module m{};  // xCreate NULL: eponymous-only, usable without CREATE VIRTUAL TABLE
    m.xConnect = Connect;
    m.xBestIndex = BestIndex;
    m.xDisconnect = Disconnect;
    m.xOpen = Open;
    m.xClose = Close;
    m.xFilter = Filter;
    m.xNext = Next;
    m.xEof = Eof;
    m.xColumn = Column;
    m.xRowid = Rowid;
    return m;
  }();
  return &module;
}

}  // namespace

Status RegisterEventBatchTable(sqlite3* db, const EventBatch* batch) {
  int rc = sqlite3_create_module_v2(db, "gw_event_batch", Module(),
                                    const_cast<EventBatch*>(batch), nullptr);
  if (rc != SQLITE_OK) return SqliteStatus(db, rc, "register gw_event_batch");
  return Status::Ok();
}

}  // namespace gw
