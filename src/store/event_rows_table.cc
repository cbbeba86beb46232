#include "store/event_rows_table.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "store/event_chunk.h"
#include "store/sqlite_util.h"

namespace gw {

namespace {

constexpr int kSessionColumn = 0, kTsColumn = 1, kSeqColumn = 2;

// idxNum bits: which constraints xFilter gets, in this argv order.
constexpr int kHasSession = 1, kHasLower = 2, kLowerExclusive = 4, kHasUpper = 8,
              kUpperInclusive = 16, kTsEqual = 32, kDescending = 64;

struct Table {
  sqlite3_vtab base;  // first: SQLite sees a sqlite3_vtab*
  sqlite3* db;
};

// One decoded chunk being merged.
struct Source {
  int64_t session = 0;
  std::vector<ChunkRow> rows;
  size_t pos = 0;
};

struct Key {
  int64_t session, ts, seq;
  bool operator<(const Key& o) const {
    if (session != o.session) return session < o.session;
    if (ts != o.ts) return ts < o.ts;
    return seq < o.seq;
  }
};

Key KeyOf(const Source* s) {
  const ChunkRow& r = s->rows[s->pos];
  return {s->session, r.col[0], r.col[1]};
}

struct Cursor;
bool Before(const Cursor* c, const Key& a, const Key& b);

struct Cursor {
  sqlite3_vtab_cursor base;  // first: SQLite sees a sqlite3_vtab_cursor*
  sqlite3* db = nullptr;
  sqlite3_stmt* chunks = nullptr;  // the chunk range, in key order
  std::string chunks_sql;          // what `chunks` was prepared from (kept across xFilter calls)
  bool pending = false;            // `chunks` is on a row not loaded yet
  Key pending_key{};
  int64_t lo = std::numeric_limits<int64_t>::min();  // ts range wanted, inclusive
  int64_t hi = std::numeric_limits<int64_t>::max();
  bool desc = false;          // rows in descending key order
  std::vector<Source*> heap;  // heap on KeyOf, first in the cursor's direction on top
  std::vector<std::unique_ptr<Source>> pool;  // spent sources, reused
  Source* current = nullptr;  // the row shown, popped from the heap
  bool eof = true;
  void Push(Source* s) {
    heap.push_back(s);
    std::push_heap(heap.begin(), heap.end(), [this](const Source* a, const Source* b) {
      return Before(this, KeyOf(b), KeyOf(a));
    });
  }
  Source* Pop() {
    std::pop_heap(heap.begin(), heap.end(), [this](const Source* a, const Source* b) {
      return Before(this, KeyOf(b), KeyOf(a));
    });
    Source* s = heap.back();
    heap.pop_back();
    return s;
  }
  ~Cursor() {
    sqlite3_finalize(chunks);
    for (Source* s : heap) delete s;
    delete current;
  }
};

// Which of two keys comes first in the cursor's direction.
bool Before(const Cursor* c, const Key& a, const Key& b) { return c->desc ? b < a : a < b; }

thread_local bool declaring = false;

int Connect(sqlite3* db, void*, int, const char* const*, sqlite3_vtab** out, char** err) {
  declaring = true;
  int rc = sqlite3_declare_vtab(db,
                                // NOT NULL where it holds: SQLite then asks for
                                // order for MIN(ts) as it does for MAX(ts).
                                "CREATE TABLE x(session INTEGER NOT NULL, ts INTEGER NOT NULL, "
                                "seq INTEGER NOT NULL" GW_EVENT_COLUMN_LIST ")");
  declaring = false;
  if (rc != SQLITE_OK) {
    *err = sqlite3_mprintf("gw_events: %s", sqlite3_errmsg(db));
    return rc;
  }
  auto* table = new Table{};
  table->db = db;
  *out = &table->base;
  return SQLITE_OK;
}

int Disconnect(sqlite3_vtab* vtab) {
  delete reinterpret_cast<Table*>(vtab);
  return SQLITE_OK;
}

int BestIndex(sqlite3_vtab*, sqlite3_index_info* info) {
  int session = -1, lower = -1, upper = -1, equal = -1;
  int bits = 0;
  for (int i = 0; i < info->nConstraint; ++i) {
    const auto& c = info->aConstraint[i];
    if (!c.usable) continue;
    if (c.iColumn == kSessionColumn && c.op == SQLITE_INDEX_CONSTRAINT_EQ && session < 0) {
      session = i;
    } else if (c.iColumn == kTsColumn) {
      switch (c.op) {
        case SQLITE_INDEX_CONSTRAINT_EQ:
          if (equal < 0) equal = i;
          break;
        case SQLITE_INDEX_CONSTRAINT_GT:
        case SQLITE_INDEX_CONSTRAINT_GE:
          if (lower < 0) {
            lower = i;
            if (c.op == SQLITE_INDEX_CONSTRAINT_GT) bits |= kLowerExclusive;
          }
          break;
        case SQLITE_INDEX_CONSTRAINT_LT:
        case SQLITE_INDEX_CONSTRAINT_LE:
          if (upper < 0) {
            upper = i;
            if (c.op == SQLITE_INDEX_CONSTRAINT_LE) bits |= kUpperInclusive;
          }
          break;
        default:
          break;
      }
    }
  }
  if (equal >= 0) {  // ts = x wins over any range
    lower = upper = -1;
    bits = kTsEqual;
  }
  int argv = 0;
  // SQLite checks every constraint again (omit stays 0): the range only narrows the scan.
  if (session >= 0) {
    bits |= kHasSession;
    info->aConstraintUsage[session].argvIndex = ++argv;
  }
  if (equal >= 0) info->aConstraintUsage[equal].argvIndex = ++argv;
  if (lower >= 0) {
    bits |= kHasLower;
    info->aConstraintUsage[lower].argvIndex = ++argv;
  }
  if (upper >= 0) {
    bits |= kHasUpper;
    info->aConstraintUsage[upper].argvIndex = ++argv;
  }
  info->idxNum = bits;
  double rows = 1e7;
  if (session >= 0) rows /= 10;
  if (equal >= 0) rows /= 1e5;
  if (lower >= 0) rows /= 4;
  if (upper >= 0) rows /= 4;
  info->estimatedRows = static_cast<sqlite3_int64>(rows);
  info->estimatedCost = rows;
  // Rows come out in (session, ts, seq) order, or the reverse; with one session, (ts, seq)
  // order too. The reverse is what MAX(ts) asks for (SQLite then reads one row).
  bool ordered = true;
  int want = 0;
  bool desc = info->nOrderBy > 0 && info->aOrderBy[0].desc;
  for (int i = 0; i < info->nOrderBy && ordered; ++i) {
    const auto& o = info->aOrderBy[i];
    if (i == 0 && o.iColumn != kSessionColumn && session >= 0) want = kTsColumn;
    if (o.iColumn != want || want > kSeqColumn || o.desc != desc) ordered = false;
    ++want;
  }
  info->orderByConsumed = ordered && info->nOrderBy > 0;
  if (info->orderByConsumed && desc) info->idxNum |= kDescending;
  return SQLITE_OK;
}

int Open(sqlite3_vtab* vtab, sqlite3_vtab_cursor** out) {
  auto* cursor = new Cursor{};
  cursor->db = reinterpret_cast<Table*>(vtab)->db;
  *out = &cursor->base;
  return SQLITE_OK;
}

int Close(sqlite3_vtab_cursor* cursor) {
  delete reinterpret_cast<Cursor*>(cursor);
  return SQLITE_OK;
}

// Reports `message` as the statement's error. `rc` is what the chunk statement returned, so
// an interrupt (a reader's time limit) stays an interrupt.
int Fail(Cursor* c, const std::string& message, int rc = SQLITE_ERROR) {
  sqlite3_free(c->base.pVtab->zErrMsg);
  c->base.pVtab->zErrMsg = sqlite3_mprintf("%s", message.c_str());
  return rc;
}

// Steps the chunk statement to its next row: pending and pending_key say what it found.
int StepChunks(Cursor* c) {
  int rc = sqlite3_step(c->chunks);
  if (rc == SQLITE_ROW) {
    c->pending = true;
    c->pending_key = {sqlite3_column_int64(c->chunks, 0), sqlite3_column_int64(c->chunks, 1),
                      ChunkSeqBase(sqlite3_column_int64(c->chunks, 2))};
    return SQLITE_OK;
  }
  c->pending = false;
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

// Decodes the pending chunk onto the heap (skipping rows before lo) and steps past it.
int LoadPending(Cursor* c) {
  std::unique_ptr<Source> s;
  if (!c->pool.empty()) {
    s = std::move(c->pool.back());
    c->pool.pop_back();
  } else {
    s = std::make_unique<Source>();
  }
  const auto* data = static_cast<const uint8_t*>(sqlite3_column_blob(c->chunks, 4));
  size_t size = static_cast<size_t>(sqlite3_column_bytes(c->chunks, 4));
  int64_t n = sqlite3_column_int64(c->chunks, 3);
  s->session = c->pending_key.session;
  Status st = DecodeChunk(data, size, n < 0 ? 0 : static_cast<size_t>(n), c->pending_key.ts,
                          sqlite3_column_int64(c->chunks, 2), &s->rows);
  if (!st.ok()) return Fail(c, st.message());
  s->pos = 0;
  if (c->desc) {
    std::reverse(s->rows.begin(), s->rows.end());
    while (s->pos < s->rows.size() && s->rows[s->pos].col[0] > c->hi) ++s->pos;
  } else {
    while (s->pos < s->rows.size() && s->rows[s->pos].col[0] < c->lo) ++s->pos;
  }
  if (s->pos < s->rows.size()) {
    c->Push(s.release());
  } else {
    c->pool.push_back(std::move(s));
  }
  if (int rc = StepChunks(c); rc != SQLITE_OK) return Fail(c, sqlite3_errmsg(c->db), rc);
  return SQLITE_OK;
}

void Recycle(Cursor* c, Source* s) { c->pool.emplace_back(s); }

// The key no row of the pending chunk (or of any chunk after it) can come before.
Key PendingBound(const Cursor* c) {
  if (!c->desc) return c->pending_key;
  const Key& k = c->pending_key;
  int64_t ts = k.ts > std::numeric_limits<int64_t>::max() - kChunkSpanNs
                   ? std::numeric_limits<int64_t>::max()
                   : k.ts + kChunkSpanNs;
  return {k.session, ts, std::numeric_limits<int64_t>::max()};
}

// Moves to the next row in key order within [lo, hi], or to eof.
int Advance(Cursor* c) {
  if (c->current) {
    Source* s = c->current;
    c->current = nullptr;
    if (++s->pos < s->rows.size()) {
      c->Push(s);
    } else {
      Recycle(c, s);
    }
  }
  for (;;) {
    // A chunk not loaded yet may hold a row that comes before the heap's first. Ascending,
    // its first row is its smallest key. Descending, it and every chunk after it start no
    // later than it does, so no row of theirs is above its start plus the longest span.
    while (c->pending && (c->heap.empty() || !Before(c, KeyOf(c->heap.front()), PendingBound(c)))) {
      if (int rc = LoadPending(c); rc != SQLITE_OK) return rc;
    }
    if (c->heap.empty()) {
      c->eof = true;
      return SQLITE_OK;
    }
    Source* s = c->Pop();
    int64_t ts = s->rows[s->pos].col[0];
    if (ts >= c->lo && ts <= c->hi) {
      c->current = s;
      c->eof = false;
      return SQLITE_OK;
    }
    if (++s->pos < s->rows.size()) {
      c->Push(s);
    } else {
      Recycle(c, s);
    }
  }
}

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// What one bound of a constraint allows.
enum class Bound {
  kNothing,  // NULL: the comparison is never true
  kAnything, // text or a blob that is not a number: no narrowing, SQLite compares each row
  kValue,    // a number, in *out (a float widened to the integer below or above it: !exact)
};

Bound ReadBound(sqlite3_value* v, bool round_up, int64_t* out, bool* exact) {
  int type = sqlite3_value_numeric_type(v);  // '42' is 42, as against an INTEGER column
  if (type == SQLITE_NULL) return Bound::kNothing;
  if (type == SQLITE_TEXT || type == SQLITE_BLOB) return Bound::kAnything;
  *exact = type == SQLITE_INTEGER;
  if (*exact) {
    *out = sqlite3_value_int64(v);
    return Bound::kValue;
  }
  double d = round_up ? std::ceil(sqlite3_value_double(v)) : std::floor(sqlite3_value_double(v));
  *out = d >= 9.2e18 ? kMax : d <= -9.2e18 ? kMin : static_cast<int64_t>(d);
  return Bound::kValue;
}

int Filter(sqlite3_vtab_cursor* cursor, int bits, const char*, int argc, sqlite3_value** argv) {
  auto* c = reinterpret_cast<Cursor*>(cursor);
  c->desc = (bits & kDescending) != 0;
  for (Source* s : c->heap) Recycle(c, s);
  c->heap.clear();
  if (c->current) Recycle(c, c->current);
  c->current = nullptr;
  c->eof = true;
  c->pending = false;
  if (c->chunks) sqlite3_reset(c->chunks);  // a constraint below may match nothing
  c->lo = kMin;
  c->hi = kMax;
  // SQLite checks every constraint again on the rows given (omit stays 0): a bound here only
  // has to be no narrower than the constraint.
  int arg = 0;
  auto next = [&]() { return arg < argc ? argv[arg++] : nullptr; };
  bool exact = true;
  bool by_session = false;
  int64_t session = 0;
  if (bits & kHasSession) {
    sqlite3_value* v = next();
    Bound b = v ? ReadBound(v, false, &session, &exact) : Bound::kAnything;
    if (b == Bound::kNothing || (b == Bound::kValue && !exact)) return SQLITE_OK;
    by_session = b == Bound::kValue;
  }
  if (bits & kTsEqual) {
    sqlite3_value* v = next();
    Bound b = v ? ReadBound(v, false, &c->lo, &exact) : Bound::kAnything;
    if (b == Bound::kNothing) return SQLITE_OK;
    if (b == Bound::kValue) {
      ReadBound(v, true, &c->hi, &exact);
    } else {
      c->lo = kMin;
    }
  }
  int64_t v = 0;
  if (bits & kHasLower) {
    sqlite3_value* value = next();
    Bound b = value ? ReadBound(value, false, &v, &exact) : Bound::kAnything;
    if (b == Bound::kNothing) return SQLITE_OK;
    if (b == Bound::kValue) {
      if ((bits & kLowerExclusive) && exact) {
        if (v == kMax) return SQLITE_OK;
        ++v;
      }
      c->lo = v;
    }
  }
  if (bits & kHasUpper) {
    sqlite3_value* value = next();
    Bound b = value ? ReadBound(value, true, &v, &exact) : Bound::kAnything;
    if (b == Bound::kNothing) return SQLITE_OK;
    if (b == Bound::kValue) {
      if (!(bits & kUpperInclusive) && exact) {
        if (v == kMin) return SQLITE_OK;
        --v;
      }
      c->hi = v;
    }
  }
  if (c->lo > c->hi) return SQLITE_OK;
  std::string sql = "SELECT session, ts, chunk, n, data FROM event_chunks WHERE 1";
  if (by_session) sql += " AND session = ?1";
  bool has_lo = c->lo != kMin;
  bool has_hi = c->hi != kMax;
  if (has_lo) sql += " AND ts >= ?2 AND last_ts >= ?4";
  if (has_hi) sql += " AND ts <= ?3";
  sql += c->desc ? " ORDER BY session DESC, ts DESC, chunk DESC" : " ORDER BY session, ts, chunk";
  // An inner loop of a join filters once per outer row, mostly with the same constraints:
  // prepare once, rebind after.
  int rc = SQLITE_OK;
  if (!c->chunks || c->chunks_sql != sql) {
    sqlite3_finalize(c->chunks);
    c->chunks = nullptr;
    c->chunks_sql.clear();
    rc = sqlite3_prepare_v2(c->db, sql.c_str(), -1, &c->chunks, nullptr);
    if (rc != SQLITE_OK) return Fail(c, std::string("gw_events: ") + sqlite3_errmsg(c->db));
    c->chunks_sql = std::move(sql);
  }
  sqlite3_bind_int64(c->chunks, 1, session);
  int64_t from = c->lo < kMin + kChunkSpanNs ? kMin : c->lo - kChunkSpanNs;
  sqlite3_bind_int64(c->chunks, 2, from);
  sqlite3_bind_int64(c->chunks, 3, c->hi);
  sqlite3_bind_int64(c->chunks, 4, c->lo);
  if (rc = StepChunks(c); rc != SQLITE_OK) return Fail(c, sqlite3_errmsg(c->db), rc);
  return Advance(c);
}

int Next(sqlite3_vtab_cursor* cursor) { return Advance(reinterpret_cast<Cursor*>(cursor)); }

int Eof(sqlite3_vtab_cursor* cursor) { return reinterpret_cast<Cursor*>(cursor)->eof; }

int Column(sqlite3_vtab_cursor* cursor, sqlite3_context* ctx, int column) {
  auto* c = reinterpret_cast<Cursor*>(cursor);
  const Source* s = c->current;
  int64_t value = column == kSessionColumn ? s->session : s->rows[s->pos].col[column - 1];
  if (value == kNull) {
    sqlite3_result_null(ctx);
  } else {
    sqlite3_result_int64(ctx, value);
  }
  return SQLITE_OK;
}

int Rowid(sqlite3_vtab_cursor* cursor, sqlite3_int64* rowid) {
  const Source* s = reinterpret_cast<Cursor*>(cursor)->current;
  *rowid = s->rows[s->pos].col[1];  // seq: unique within a session
  return SQLITE_OK;
}

const sqlite3_module* Module() {
  static const sqlite3_module module = [] {
    sqlite3_module m{};
    m.xCreate = Connect;  // CREATE VIRTUAL TABLE event_rows USING gw_events
    m.xConnect = Connect;
    m.xBestIndex = BestIndex;
    m.xDisconnect = Disconnect;
    m.xDestroy = Disconnect;  // dropping the view of the chunks leaves the chunks alone
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

bool DeclaringEventRows() { return declaring; }

// Schema 9 keeps events in chunks; the index on (session, ts, last_ts, n) answers these.
constexpr int64_t kChunkSchema = 9;

std::string RawFirstTsSql(int64_t schema_version, const std::string& session,
                          const std::string& lo, const std::string& hi) {
  const std::string in_span = lo.empty() ? "" : " AND ts >= " + lo + " AND ts <= " + hi;
  return std::string("SELECT MIN(ts) FROM ") +
         (schema_version >= kChunkSchema ? "event_chunks" : "event_rows") +
         " WHERE session = " + session + in_span;
}

std::string RawLastTsSql(int64_t schema_version, const std::string& session,
                         const std::string& lo, const std::string& hi) {
  const std::string in_span = lo.empty() ? "" : " AND ts >= " + lo + " AND ts <= " + hi;
  if (schema_version < kChunkSchema) {
    return "SELECT MAX(ts) FROM event_rows WHERE session = " + session + in_span;
  }
  // The newest event is in a chunk that starts at most one span before the newest start.
  const std::string newest_last = lo.empty() ? "MAX(last_ts)" : "MIN(MAX(last_ts), " + hi + ")";
  return "SELECT " + newest_last + " FROM event_chunks WHERE session = " + session + in_span +
         " AND ts >= (SELECT MAX(ts) FROM event_chunks WHERE session = " + session + in_span +
         ") - " + std::to_string(kChunkSpanNs);
}

std::string RawCountSql(int64_t schema_version, const std::string& session) {
  return schema_version >= kChunkSchema
             ? "SELECT SUM(n) FROM event_chunks WHERE session = " + session
             : "SELECT COUNT(*) FROM event_rows WHERE session = " + session;
}

std::string RawCountBySessionSql(int64_t schema_version) {
  return schema_version >= kChunkSchema
             ? "SELECT session, SUM(n) FROM event_chunks GROUP BY session"
             : "SELECT session, COUNT(*) FROM event_rows GROUP BY session";
}

Status RegisterEventRowsModule(sqlite3* db) {
  int rc = sqlite3_create_module_v2(db, "gw_events", Module(), nullptr, nullptr);
  if (rc != SQLITE_OK) return SqliteStatus(db, rc, "register gw_events");
  return Status::Ok();
}

}  // namespace gw
