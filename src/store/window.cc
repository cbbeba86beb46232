#include "store/window.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/saturating.h"
#include "store/event_rows_table.h"
#include "store/reader.h"
#include "store/thread_rollups.h"

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
  double secs = static_cast<double>(to - from) / 1e9;
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

StatusOr<int64_t> ResolveSession(StoreReader& reader, int64_t session) {
  if (session == 0) return reader.LatestSession();
  bool found = false;
  std::string ids;
  RETURN_IF_ERROR(reader.ForEach("SELECT id FROM sessions ORDER BY id", {}, [&](sqlite3_stmt* s) {
    int64_t id = sqlite3_column_int64(s, 0);
    found = found || id == session;
    ids += (ids.empty() ? "" : ", ") + std::to_string(id);
  }));
  if (!found) {
    return NotFound("session " + std::to_string(session) + " is not in " + reader.path() +
                    " (sessions: " + (ids.empty() ? "none" : ids) + ")");
  }
  return session;
}

bool TierSpan::raw_pruned() const {
  // A bucket holds the rollups of rows that start in it: one that ends before the oldest raw
  // row had rows of its own, since deleted.
  return has_rollups &&
         (!has_raw || rollup_first + kThreadRollupSeconds * 1'000'000'000 <= raw_first);
}

StatusOr<TierSpan> ReadTierSpan(StoreReader& reader, int64_t session) {
  TierSpan span;
  // One statement each: each is one seek in a (session, ts|sec, …) key; MIN and MAX in one
  // statement would scan the session.
  auto bound = [&](const std::string& sql, int64_t* out, bool* found) {
    return reader.ForEach(sql, {session}, [&](sqlite3_stmt* s) {
      if (sqlite3_column_type(s, 0) == SQLITE_NULL) return;
      *out = sqlite3_column_int64(s, 0);
      *found = true;
    });
  };
  bool unused = false;
  ASSIGN_OR_RETURN(int64_t version, reader.SchemaVersion());
  RETURN_IF_ERROR(bound(RawFirstTsSql(version, "?1"), &span.raw_first, &span.has_raw));
  RETURN_IF_ERROR(bound(RawLastTsSql(version, "?1"), &span.raw_last, &unused));
  if (version < 7) return span;
  int64_t first_sec = 0, last_sec = 0;
  RETURN_IF_ERROR(bound("SELECT MIN(sec) FROM thread_rollups WHERE session = ?1", &first_sec,
                        &span.has_rollups));
  RETURN_IF_ERROR(bound("SELECT MAX(sec) FROM thread_rollups WHERE session = ?1", &last_sec,
                        &unused));
  span.rollup_first = first_sec * 1'000'000'000;
  span.rollup_last = (last_sec + kThreadRollupSeconds) * 1'000'000'000 - 1;
  return span;
}

StatusOr<SessionWindow> ResolveWindow(StoreReader& reader, const WindowRequest& request) {
  RETURN_IF_ERROR(ValidateWindowRequest(request));
  ASSIGN_OR_RETURN(int64_t session, ResolveSession(reader, request.session));
  ASSIGN_OR_RETURN(TierSpan span, ReadTierSpan(reader, session));
  std::optional<int64_t> first, last;
  if (span.has_raw) {
    first = span.raw_first;
    last = span.raw_last;
  }
  // Under --max-db the rollup tier outlives the raw rows: the session then begins where its
  // oldest rollup does, and one whose raw rows are all gone ends with its rollups.
  if (span.raw_pruned()) {
    first = span.rollup_first;
    if (!last) last = span.rollup_last;
  }
  if (!first || !last) {
    return NotFound("session " + std::to_string(session) + " in " + reader.path() +
                    " has no events — hint: was the traced job running? check `gpuwhy query "
                    "\"SELECT * FROM sessions\"` for drops");
  }
  // A session `trace -- CMD` recorded is the job's whole lifetime: by default, all of it.
  std::string kind;
  RETURN_IF_ERROR(reader.ForEach("SELECT kind FROM sessions WHERE id = ?1", {session},
                                 [&](sqlite3_stmt* s) {
                                   const unsigned char* t = sqlite3_column_text(s, 0);
                                   if (t != nullptr) kind = reinterpret_cast<const char*>(t);
                                 }));
  if (kind == kJobSessionKind) {
    WindowRequest whole = request;
    whole.default_since_ns.reset();
    return WindowOfSession(whole, session, *first, *last);
  }
  return WindowOfSession(request, session, *first, *last);
}

}  // namespace gw
