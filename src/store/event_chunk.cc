#include "store/event_chunk.h"

#include "store/sqlite_util.h"

namespace gw {

namespace {

// Format 2 added since_work_ns (schema 13); format 1 chunks hold the 11 optional columns before
// it, and read it as NULL.
constexpr uint8_t kFormat = 2;
constexpr int kFormat1Optional = 11;

// The optional columns, in ChunkRow order from kFirstOptional on.
constexpr const auto& kOptional = kEventOptionalColumns;
constexpr int kOptionalCount = kEventOptionalCount;
constexpr int kFirstOptional = kChunkColumns - kOptionalCount;  // after ts..duration_ns
static_assert(kFirstOptional == 6);
static_assert(kOptionalCount == 12, "a new column needs a new chunk format");
static_assert(kEventColumn_duration_ns == 3);  // pid, tid, op, duration_ns: coded their own way
// Addresses are stored as deltas from the previous one.
constexpr int kAddrOptional = kEventColumn_addr - kEventColumn_duration_ns - 1;

// Presence tags of an optional column.
constexpr uint8_t kNone = 0, kAll = 1, kSome = 2;

// Deltas and zigzag in unsigned arithmetic: wraps the same way both ways, so any int64 pair
// (kNull excluded by the presence maps) round-trips.
uint64_t Zigzag(uint64_t v) { return (v << 1) ^ (0 - (v >> 63)); }
uint64_t Unzigzag(uint64_t v) { return (v >> 1) ^ (0 - (v & 1)); }

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

struct Reader {
  const uint8_t* p;
  const uint8_t* end;
  bool ok = true;
  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) break;
      uint8_t b = *p++;
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    ok = false;
    return 0;
  }
  uint8_t Byte() {
    if (p >= end) {
      ok = false;
      return 0;
    }
    return *p++;
  }
};

}  // namespace

void EncodeChunk(const Event* events, const uint32_t* order, size_t n, std::string* out) {
  out->push_back(static_cast<char>(kFormat));
  for (size_t i = 1; i < n; ++i) {
    PutVarint(static_cast<uint64_t>(events[order[i]].ts_ns - events[order[i - 1]].ts_ns), out);
  }
  uint64_t prev = 0;
  for (size_t i = 0; i < n; ++i) {
    uint64_t pid = static_cast<uint64_t>(static_cast<int64_t>(events[order[i]].pid));
    PutVarint(Zigzag(pid - prev), out);
    prev = pid;
  }
  for (size_t i = 0; i < n; ++i) {
    const Event& e = events[order[i]];
    PutVarint(Zigzag(static_cast<uint64_t>(static_cast<int64_t>(e.tid) - e.pid)), out);
  }
  for (size_t i = 0; i < n; ++i) PutVarint(static_cast<uint64_t>(events[order[i]].op), out);
  for (size_t i = 0; i < n; ++i) {
    PutVarint(Zigzag(static_cast<uint64_t>(events[order[i]].duration_ns)), out);
  }
  for (int c = 0; c < kOptionalCount; ++c) {
    size_t present = 0;
    for (size_t i = 0; i < n; ++i) present += events[order[i]].*kOptional[c] != kNull;
    if (present == 0) {
      out->push_back(static_cast<char>(kNone));
      continue;
    }
    if (present == n) {
      out->push_back(static_cast<char>(kAll));
    } else {
      out->push_back(static_cast<char>(kSome));
      for (size_t i = 0; i < n; i += 8) {
        uint8_t bits = 0;
        for (size_t j = i; j < n && j < i + 8; ++j) {
          bits |= static_cast<uint8_t>((events[order[j]].*kOptional[c] != kNull) << (j - i));
        }
        out->push_back(static_cast<char>(bits));
      }
    }
    uint64_t last = 0;
    for (size_t i = 0; i < n; ++i) {
      int64_t v = events[order[i]].*kOptional[c];
      if (v == kNull) continue;
      if (c == kAddrOptional) {
        PutVarint(Zigzag(static_cast<uint64_t>(v) - last), out);
        last = static_cast<uint64_t>(v);
      } else {
        PutVarint(Zigzag(static_cast<uint64_t>(v)), out);
      }
    }
  }
}

Status DecodeChunk(const uint8_t* data, size_t size, size_t n, int64_t first_ts, int64_t chunk,
                   std::vector<ChunkRow>* rows) {
  // The count comes from the file: checked before anything is sized by it.
  if (n > kChunkEvents) {
    rows->clear();
    return DataLoss("event chunk " + std::to_string(chunk) + " is corrupt (" +
                    std::to_string(n) + " events, at most " + std::to_string(kChunkEvents) + ")");
  }
  rows->resize(n);
  if (n == 0) return Status::Ok();
  Reader r{data, data + size};
  uint8_t format = r.Byte();
  if (format != kFormat && format != 1) {
    return DataLoss("event chunk " + std::to_string(chunk) + " is corrupt (unknown format)");
  }
  const int optional = format == 1 ? kFormat1Optional : kOptionalCount;
  // The chunk number, its first timestamp and the deltas are the file's: a chunk spans at
  // most kChunkSpanNs, so every timestamp lies in [first_ts, first_ts + span] and fits.
  if (chunk < 0 || chunk > kMaxChunkNumber || first_ts > INT64_MAX - kChunkSpanNs) {
    rows->clear();
    return DataLoss("event chunk " + std::to_string(chunk) + " is corrupt (chunk number or " +
                    "first timestamp out of range)");
  }
  ChunkRow* out = rows->data();
  uint64_t span = 0;
  for (size_t i = 0; i < n; ++i) {
    uint64_t delta = i > 0 ? r.Varint() : 0;
    if (delta > static_cast<uint64_t>(kChunkSpanNs) - span) {
      rows->clear();
      return DataLoss("event chunk " + std::to_string(chunk) +
                      " is corrupt (its timestamps span more than a chunk can)");
    }
    span += delta;
    out[i].col[0] = first_ts + static_cast<int64_t>(span);
    out[i].col[1] = chunk * kChunkSeqStride + static_cast<int64_t>(i);
  }
  uint64_t pid = 0;
  for (size_t i = 0; i < n; ++i) {
    pid += Unzigzag(r.Varint());
    out[i].col[2] = static_cast<int64_t>(pid);
  }
  for (size_t i = 0; i < n; ++i) {
    // Wrapping (unsigned) sums: an edited delta gives a wrong tid, never undefined behaviour.
    out[i].col[3] =
        static_cast<int64_t>(static_cast<uint64_t>(out[i].col[2]) + Unzigzag(r.Varint()));
  }
  for (size_t i = 0; i < n; ++i) out[i].col[4] = static_cast<int64_t>(r.Varint());
  for (size_t i = 0; i < n; ++i) out[i].col[5] = static_cast<int64_t>(Unzigzag(r.Varint()));
  uint8_t bits[(kChunkEvents + 7) / 8];
  for (int c = optional; c < kOptionalCount; ++c) {
    for (size_t i = 0; i < n; ++i) out[i].col[kFirstOptional + c] = kNull;
  }
  for (int c = 0; c < optional; ++c) {
    int col = kFirstOptional + c;
    uint8_t tag = r.Byte();
    if (tag == kNone) {
      for (size_t i = 0; i < n; ++i) out[i].col[col] = kNull;
      continue;
    }
    if (tag == kSome) {
      for (size_t b = 0; b < (n + 7) / 8; ++b) bits[b] = r.Byte();
    } else if (tag != kAll) {
      r.ok = false;
      break;
    }
    uint64_t last = 0;
    for (size_t i = 0; i < n; ++i) {
      if (tag == kSome && !(bits[i / 8] & (1u << (i % 8)))) {
        out[i].col[col] = kNull;
        continue;
      }
      uint64_t v = Unzigzag(r.Varint());
      if (c == kAddrOptional) {
        last += v;
        v = last;
      }
      out[i].col[col] = static_cast<int64_t>(v);
    }
  }
  if (!r.ok || r.p != r.end) {
    return DataLoss("event chunk " + std::to_string(chunk) + " is corrupt (" +
                    std::to_string(size) + " bytes for " + std::to_string(n) + " events)");
  }
  return Status::Ok();
}

Status InsertChunks(sqlite3* db, sqlite3_stmt* insert, int64_t session, const Event* events,
                    const uint32_t* order, size_t n, std::string* scratch) {
  size_t first = 0;
  while (first < n) {
    int64_t first_ts = events[order[first]].ts_ns;
    size_t end = first + 1;
    while (end < n && end - first < kChunkEvents &&
           events[order[end]].ts_ns - first_ts <= kChunkSpanNs) {
      ++end;
    }
    scratch->clear();
    EncodeChunk(events, order + first, end - first, scratch);
    sqlite3_bind_int64(insert, 1, session);
    sqlite3_bind_int64(insert, 2, first_ts);
    sqlite3_bind_int64(insert, 3, events[order[end - 1]].ts_ns);
    sqlite3_bind_int64(insert, 4, static_cast<int64_t>(end - first));
    sqlite3_bind_blob(insert, 5, scratch->data(), static_cast<int>(scratch->size()),
                      SQLITE_STATIC);
    int rc = sqlite3_step(insert);
    sqlite3_reset(insert);
    if (rc != SQLITE_DONE) return SqliteStatus(db, rc, "insert event chunk");
    first = end;
  }
  return Status::Ok();
}

}  // namespace gw
