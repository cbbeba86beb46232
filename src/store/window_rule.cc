// The window rule (pure: no file): what a window request means for a session whose events
// span [first, last]. Resolving it against a database is window.cc.
#include "store/window.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "base/saturating.h"

namespace gw {

namespace {

std::string Seconds(int64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ns) / 1e9);
  return buf;
}

}  // namespace

std::string WindowLabel(int64_t from, int64_t to, bool relative) {
  char buf[96];
  double secs = static_cast<double>(SaturatingSub(to, from)) / 1e9;
  if (relative) {
    if (secs >= 3600 && static_cast<int64_t>(secs) % 3600 == 0) {
      std::snprintf(buf, sizeof(buf), "last %lld h", static_cast<long long>(secs / 3600));
    } else if (secs >= 120 && static_cast<int64_t>(secs) % 60 == 0) {
      std::snprintf(buf, sizeof(buf), "last %lld min", static_cast<long long>(secs / 60));
    } else {
      std::snprintf(buf, sizeof(buf), "last %.0f s", secs);
    }
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f s – %.1f s", static_cast<double>(from) / 1e9,
                  static_cast<double>(to) / 1e9);
  }
  return buf;
}

int64_t SecondsToNs(double seconds) {
  if (!(seconds < 9.2e9)) return INT64_MAX;  // also NaN; callers bound their arguments first
  if (seconds <= -9.2e9) return INT64_MIN;
  return static_cast<int64_t>(std::llround(seconds * 1e9));
}

Status ValidateWindowRequest(const WindowRequest& r) {
  const WindowArgNames& n = r.names;
  if (r.session < 0) {
    return InvalidArgument(std::string(n.session) + " must be a session id (0 = the newest)");
  }
  if (r.since_ns && *r.since_ns <= 0) {
    return InvalidArgument(std::string(n.since) + " must be a positive duration, e.g. 120s");
  }
  if (r.default_since_ns && *r.default_since_ns <= 0) {
    return InvalidArgument("the default window length must be positive");
  }
  if (r.since_ns && r.from_ns) {
    return InvalidArgument(std::string("give either ") + n.since + " or " + n.from +
                           ", not both (" + n.since + " is the length of the window ending at " +
                           n.to + " or at the newest event)");
  }
  if ((r.from_ns && *r.from_ns < 0) || (r.to_ns && *r.to_ns < 0)) {
    return InvalidArgument(std::string(n.from) + " and " + n.to +
                           " are times since the session started and cannot be negative");
  }
  if (r.from_ns && r.to_ns && *r.to_ns <= *r.from_ns) {
    return InvalidArgument(std::string("empty window: ") + n.from + " must be before " + n.to +
                           " (both are times since the session started, e.g. " + n.from +
                           " 30s " + n.to + " 90s)");
  }
  return Status::Ok();
}

StatusOr<SessionWindow> WindowOfSession(const WindowRequest& r, int64_t session,
                                        int64_t first_ts_ns, int64_t last_ts_ns) {
  RETURN_IF_ERROR(ValidateWindowRequest(r));
  SessionWindow w;
  w.session = session;
  w.first_ts_ns = first_ts_ns;
  w.last_ts_ns = last_ts_ns;
  w.end_ns = r.to_ns.value_or(SaturatingAdd(last_ts_ns, 1));
  std::optional<int64_t> since = r.since_ns ? r.since_ns : r.default_since_ns;
  // Timestamps count from the session's start; an edited file may hold earlier ones.
  const int64_t session_start = std::min<int64_t>(0, first_ts_ns);
  bool relative = false;
  if (r.from_ns) {
    w.begin_ns = *r.from_ns;
  } else if (since) {
    w.begin_ns = std::max(session_start, SaturatingSub(w.end_ns, *since));
    relative = !r.to_ns;
  } else {
    w.begin_ns = first_ts_ns;
    w.whole_session = !r.to_ns;
  }
  if (w.end_ns <= w.begin_ns) {
    return InvalidArgument(
        "empty window: it would start at " + Seconds(w.begin_ns) + " and end at " +
        Seconds(w.end_ns) + " of session " + std::to_string(session) + ", whose events span " +
        Seconds(first_ts_ns) + " – " + Seconds(last_ts_ns) + " — hint: " + r.names.from +
        " and " + r.names.to + " are times since the session started");
  }
  // Analyses and exports size buffers from the window: one stretched by an edited file (or a
  // typo in --from) must not make them allocate for centuries.
  if (SaturatingSub(w.end_ns, w.begin_ns) > kMaxWindowNs) {
    return InvalidArgument(
        "the window would span " + Seconds(SaturatingSub(w.end_ns, w.begin_ns)) + " (" +
        Seconds(w.begin_ns) + " – " + Seconds(w.end_ns) + " of session " +
        std::to_string(session) + "); at most " + std::to_string(kMaxWindowNs / kNsPerDay) +
        " days are read at once — hint: narrow it with " + r.names.since + ", or " +
        r.names.from + " and " + r.names.to);
  }
  if (w.whole_session) {
    w.label = "whole session";
  } else if (relative) {
    // The length the recording really covers: a 21 s recording asked for 2 min is "last 21 s".
    int64_t covered = SaturatingSub(w.end_ns, std::max(w.begin_ns, first_ts_ns));
    w.label = WindowLabel(0, std::min(*since, covered), true);
  } else {
    w.label = WindowLabel(w.begin_ns, w.end_ns, false);
  }
  return w;
}

}  // namespace gw
