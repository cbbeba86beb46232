// Event chunks: how event_rows is stored since schema 9. Up to kChunkEvents events of one
// session, sorted by timestamp, packed column by column into one blob of `event_chunks`
// (timestamps as deltas, everything a zigzag varint, each optional column behind a presence
// map). One SQL row per chunk instead of one per event is what brings a recording under 32 B
// per event (BENCHMARKS.md item 3); the virtual table `event_rows` (event_rows_table.h) shows
// the chunks as the rows they hold.
#pragma once

#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/event.h"
#include "store/event_columns.h"

namespace gw {

// At most this many events per chunk...
inline constexpr size_t kChunkEvents = 128;
// ...and no chunk spans more than this from its first to its last timestamp. A reader of
// [lo, hi) therefore finds every chunk it needs among those that start in [lo - span, hi).
inline constexpr int64_t kChunkSpanNs = 100'000'000;
// seq of the i-th event of chunk c: c * kChunkEvents + i, unique within the session and in
// (ts, seq) order within a chunk.
inline constexpr int64_t kChunkSeqStride = static_cast<int64_t>(kChunkEvents);
// The largest chunk number whose seqs fit in 64 bits; a larger one (an edited file) is corrupt.
inline constexpr int64_t kMaxChunkNumber = INT64_MAX / kChunkSeqStride - 1;
// The first seq of chunk `chunk`, clamped into what a valid chunk can have (for ordering).
inline int64_t ChunkSeqBase(int64_t chunk) {
  return (chunk < 0 ? 0 : chunk > kMaxChunkNumber ? kMaxChunkNumber : chunk) * kChunkSeqStride;
}

// The columns of one decoded event, in event_rows' column order after session: ts, seq, then
// GW_EVENT_COLUMNS (event_columns.h). kNull = SQL NULL.
inline constexpr int kChunkColumns = 2 + kEventColumnCount;
struct ChunkRow {
  int64_t col[kChunkColumns];
};

// Appends the encoding of `events[order[0..n)]` (already sorted by ts) to `out`.
void EncodeChunk(const Event* events, const uint32_t* order, size_t n, std::string* out);

// Decodes a chunk of `n` events whose first timestamp is `first_ts` and whose number is
// `chunk` into `rows` (replaced). An error for a blob that does not decode to `n` events.
Status DecodeChunk(const uint8_t* data, size_t size, size_t n, int64_t first_ts, int64_t chunk,
                   std::vector<ChunkRow>* rows);

// The statement InsertChunks binds: session, ts (first), last_ts, n, data.
inline constexpr const char* kInsertChunkSql =
    "INSERT INTO event_chunks(session, ts, last_ts, n, data) VALUES (?,?,?,?,?)";

// Cuts events[order[0..n)] (sorted by ts) into chunks of at most kChunkEvents events spanning
// at most kChunkSpanNs and inserts each with `insert` (kInsertChunkSql) into `session`.
Status InsertChunks(sqlite3* db, sqlite3_stmt* insert, int64_t session, const Event* events,
                    const uint32_t* order, size_t n, std::string* scratch);

}  // namespace gw
