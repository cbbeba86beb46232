// EventBatch: the writer's batch of events as the eponymous virtual table `gw_event_batch`, so
// one `INSERT INTO event_rows SELECT ... FROM gw_event_batch` moves a whole batch without a
// bind, step and reset per row. Registered on the writer's connection only: nothing about it is
// stored in the file, and readers never see it.
#pragma once

#include <sqlite3.h>

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "store/event.h"

namespace gw {

// One event of the batch in key order: (ts, seq) is unique within the session.
struct BatchRow {
  int64_t ts;
  uint32_t index;  // into EventBatch::events
  uint32_t seq;
};

// What the table shows: rows[0, count) of events, all in `session`. The writer points it at
// the rows to insert before each INSERT ... SELECT.
struct EventBatch {
  int64_t session = 0;
  const Event* events = nullptr;
  const BatchRow* rows = nullptr;
  size_t count = 0;
};

// Registers `gw_event_batch` on `db`, reading `*batch` whenever it is scanned. Columns, in this
// order: session, ts, seq, pid, tid, op, duration_ns, ret, bytes, kind, cpu, other_pid, runq_ns,
// addr, name_id, stack_id (kNull arguments read as NULL). `batch` must outlive `db`.
Status RegisterEventBatchTable(sqlite3* db, const EventBatch* batch);

}  // namespace gw
