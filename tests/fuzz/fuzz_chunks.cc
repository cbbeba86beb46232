// libFuzzer target: an event chunk as an edited file holds it (the row's count, first
// timestamp and chunk number, and the blob), decoded and turned into the window an explain or
// export would read (issue 32 item 5). Invariants: a chunk that decodes has its count of rows,
// its timestamps inside [first_ts, first_ts + kChunkSpanNs] in order and its seqs from the chunk
// number; a window that resolves is non-empty and at most kMaxWindowNs long; nothing overflows
// (UBSan) and nothing is sized from the timestamps.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "store/event_chunk.h"
#include "store/window.h"

namespace {

int64_t Take64(const uint8_t*& p, size_t& left) {
  uint64_t v = 0;
  size_t k = left < 8 ? left : 8;
  std::memcpy(&v, p, k);
  p += k;
  left -= k;
  return static_cast<int64_t>(v);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t* p = data;
  size_t left = size;
  const size_t n = *p++ % (gw::kChunkEvents + 4);  // a few counts past the limit too
  --left;
  const uint8_t mode = left > 0 ? (--left, *p++) : 0;
  // Timestamps and chunk numbers near the edges of int64 are what edits reach for.
  int64_t first_ts = Take64(p, left);
  int64_t chunk = Take64(p, left);
  if (mode & 1) first_ts = INT64_MAX - (first_ts & 0xffff);
  if (mode & 2) chunk = INT64_MAX - (chunk & 0xff);
  const int64_t from = Take64(p, left);
  const int64_t to = Take64(p, left);
  const int64_t since = Take64(p, left);

  std::vector<gw::ChunkRow> rows;
  gw::Status st = gw::DecodeChunk(p, left, n, first_ts, chunk, &rows);
  int64_t last_ts = first_ts;
  if (st.ok()) {
    if (rows.size() != n) __builtin_trap();
    int64_t prev = first_ts;
    for (size_t i = 0; i < rows.size(); ++i) {
      int64_t ts = rows[i].col[0];
      if (ts < prev || ts - first_ts > gw::kChunkSpanNs) __builtin_trap();
      if (rows[i].col[1] != chunk * gw::kChunkSeqStride + static_cast<int64_t>(i)) {
        __builtin_trap();
      }
      prev = ts;
    }
    if (!rows.empty()) last_ts = rows.back().col[0];
  }

  gw::WindowRequest r;
  if (mode & 4) r.from_ns = from;
  if (mode & 8) r.to_ns = to;
  if (mode & 16) r.since_ns = since;
  if (mode & 32) r.default_since_ns = gw::kDefaultSinceNs;
  gw::StatusOr<gw::SessionWindow> w = gw::WindowOfSession(r, 1, first_ts, last_ts);
  if (w.ok()) {
    if (w->end_ns <= w->begin_ns) __builtin_trap();
    if (static_cast<uint64_t>(w->end_ns) - static_cast<uint64_t>(w->begin_ns) >
        static_cast<uint64_t>(gw::kMaxWindowNs)) {
      __builtin_trap();
    }
  }
  return 0;
}
