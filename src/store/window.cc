#include "store/window.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "base/saturating.h"
#include "store/event_rows_table.h"
#include "store/reader.h"
#include "store/thread_rollups.h"

namespace gw {

namespace {

// The newest session that recorded something (raw rows or rollups), with its span: a trace that
// saw no job (it found no CUDA process, or was stopped at once) leaves an empty session that
// must not hide the last real one. With none recorded, the newest, whose window then says it is
// empty.
StatusOr<std::pair<int64_t, TierSpan>> NewestRecordedSession(StoreReader& reader) {
  std::vector<int64_t> ids;
  RETURN_IF_ERROR(reader.ForEach("SELECT id FROM sessions ORDER BY id DESC", {},
                                 [&](sqlite3_stmt* s) { ids.push_back(sqlite3_column_int64(s, 0)); }));
  if (ids.empty()) return reader.LatestSession().status();  // "holds no recording session yet"
  for (int64_t id : ids) {
    ASSIGN_OR_RETURN(TierSpan span, ReadTierSpan(reader, id));
    if (span.has_raw || span.has_rollups) return std::make_pair(id, span);
  }
  return std::make_pair(ids.front(), TierSpan{});
}

}  // namespace

StatusOr<int64_t> ResolveSession(StoreReader& reader, int64_t session) {
  if (session == 0) {
    ASSIGN_OR_RETURN(auto newest, NewestRecordedSession(reader));
    return newest.first;
  }
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

StatusOr<PlausibleSpan> ReadPlausibleSpan(StoreReader& reader, int64_t session) {
  int64_t wall_start = 0;
  std::optional<int64_t> wall_stop;
  RETURN_IF_ERROR(reader.ForEach(
      "SELECT wall_start_ns, wall_stop_ns FROM sessions WHERE id = ?1", {session},
      [&](sqlite3_stmt* s) {
        wall_start = sqlite3_column_int64(s, 0);
        if (sqlite3_column_type(s, 1) != SQLITE_NULL) wall_stop = sqlite3_column_int64(s, 1);
      }));
  int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  // Open (or killed) sessions end no later than now; none ends before it began.
  int64_t stop = wall_stop ? std::min(*wall_stop, now) : now;
  PlausibleSpan span;
  span.first_ns = -kSessionClockSlackNs;
  span.last_ns =
      SaturatingAdd(std::max<int64_t>(0, SaturatingSub(stop, wall_start)), kSessionClockSlackNs);
  return span;
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
  // Rows outside the session's plausible span (an edited file) are not part of it: they would
  // stretch every window, and every buffer sized from one, to centuries.
  ASSIGN_OR_RETURN(PlausibleSpan plausible, ReadPlausibleSpan(reader, session));
  const std::string lo = std::to_string(plausible.first_ns);
  const std::string hi = std::to_string(plausible.last_ns);
  RETURN_IF_ERROR(bound(RawFirstTsSql(version, "?1", lo, hi), &span.raw_first, &span.has_raw));
  RETURN_IF_ERROR(bound(RawLastTsSql(version, "?1", lo, hi), &span.raw_last, &unused));
  if (version < 7) return span;
  int64_t first_sec = 0, last_sec = 0;
  const std::string secs = " AND sec >= " + std::to_string(plausible.first_ns / 1'000'000'000) +
                           " AND sec <= " + std::to_string(plausible.last_ns / 1'000'000'000);
  RETURN_IF_ERROR(bound("SELECT MIN(sec) FROM thread_rollups WHERE session = ?1" + secs,
                        &first_sec, &span.has_rollups));
  RETURN_IF_ERROR(bound("SELECT MAX(sec) FROM thread_rollups WHERE session = ?1" + secs,
                        &last_sec, &unused));
  span.rollup_first = first_sec * 1'000'000'000;
  span.rollup_last = (last_sec + kThreadRollupSeconds) * 1'000'000'000 - 1;
  return span;
}

StatusOr<SessionWindow> ResolveWindow(StoreReader& reader, const WindowRequest& request) {
  RETURN_IF_ERROR(ValidateWindowRequest(request));
  int64_t session = request.session;
  TierSpan span;
  if (session == 0) {
    ASSIGN_OR_RETURN(std::tie(session, span), NewestRecordedSession(reader));
  } else {
    ASSIGN_OR_RETURN(session, ResolveSession(reader, session));
    ASSIGN_OR_RETURN(span, ReadTierSpan(reader, session));
  }
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
