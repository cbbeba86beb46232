// The only place analysis talks to a database: the SQL that loads a WindowData through
// StoreReader. Every query is bounded by the window: a range of event_rows' clustered
// (session, ts, seq) key, or of op_seconds' (session, sec, ...) key. Nothing scans a session.
#pragma once

#include <cstdint>
#include <optional>

#include "analysis/window_data.h"
#include "base/status.h"
#include "store/reader.h"

namespace gw {

struct WindowRequest {
  int64_t session = 0;  // 0 = newest
  int64_t since_ns = 120'000'000'000;
  std::optional<int64_t> from_ns;
  std::optional<int64_t> to_ns;
  bool whole_session = false;  // diff: the whole session regardless of since_ns
};

StatusOr<WindowData> LoadWindow(StoreReader& reader, const WindowRequest& request);

// "last 2 min", "last 45 s", "12.0 s – 40.0 s".
std::string WindowLabel(int64_t from, int64_t to, bool relative);

}  // namespace gw
