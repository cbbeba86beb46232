// The analysis time window, defined once: which session of a file, and which [begin, end) of
// its timestamps (ns since that session started), a request means. `gpuwhy explain`, `gpuwhy
// diff` (through the analysis loader) and every windowed MCP tool resolve their window here, so
// the same request gives the same range on the same file.
//
// The rule (docs: src/store/README.md):
//   end   = to, else the session's newest event + 1 (so the newest event is inside);
//   begin = from, else end − since (since: the request's, else its default), clipped to the
//           session's start (0, or its first event if an edited file has earlier ones);
//           with neither from nor a since: the session's first event (the whole session).
//   A session of kind "job" (`trace -- CMD`: the job's lifetime) ignores the default since:
//   without since or from it is the whole session.
//   since together with from is refused; since with to is "since, ending at to".
//   An empty window (end ≤ begin), a session that is not there and a session without events
//   are errors that say so.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"

namespace gw {

class StoreReader;

// sessions.kind of a recording made by `trace -- CMD`.
inline constexpr char kJobSessionKind[] = "job";

// explain's default window: the last 2 minutes of the session.
inline constexpr int64_t kDefaultSinceNs = 120'000'000'000;

// How the front end spells the window arguments, for error messages.
struct WindowArgNames {
  const char* since = "--since";
  const char* from = "--from";
  const char* to = "--to";
  const char* session = "--session";
};

struct WindowRequest {
  int64_t session = 0;              // 0 = the newest session in the file
  std::optional<int64_t> since_ns;  // a length ending at `to` (default: the newest event + 1)
  std::optional<int64_t> from_ns;   // session ns, inclusive
  std::optional<int64_t> to_ns;     // session ns, exclusive
  // Used when neither since nor from is given: the last this long (explain), or, when absent,
  // the whole session (diff, the MCP data tools).
  std::optional<int64_t> default_since_ns;
  WindowArgNames names;
};

// A request for the newest session that, without since or from, is the last `since_ns`.
inline WindowRequest WindowRequestWithDefaultSince(int64_t since_ns) {
  WindowRequest r;
  r.default_since_ns = since_ns;
  return r;
}

// A resolved window: [begin_ns, end_ns) of one session's timestamps.
// The longest window read at once (31 days): longer ones are refused with a hint.
inline constexpr int64_t kNsPerDay = int64_t{86'400} * 1'000'000'000;
inline constexpr int64_t kMaxWindowNs = 31 * kNsPerDay;

struct SessionWindow {
  int64_t session = 0;
  int64_t begin_ns = 0;     // inclusive
  int64_t end_ns = 0;       // exclusive
  int64_t first_ts_ns = 0;  // the session's first and last event
  int64_t last_ts_ns = 0;
  bool whole_session = false;  // neither from, to nor a since applied
  std::string label;           // "last 2 min", "last 21 s", "12.0 s – 40.0 s", "whole session"
};

// The request's own consistency (no file needed): front ends call it to refuse bad flags before
// opening a database; ResolveWindow calls it again.
Status ValidateWindowRequest(const WindowRequest& request);

// The rule above for a session whose events span [first_ts_ns, last_ts_ns] (pure; for tests).
StatusOr<SessionWindow> WindowOfSession(const WindowRequest& request, int64_t session,
                                        int64_t first_ts_ns, int64_t last_ts_ns);

// Where a session's two tiers begin and end (session ns): raw rows (event_rows) and the
// rollups that outlive them under --max-db (thread_rollups buckets, schema 7).
struct TierSpan {
  bool has_raw = false;
  int64_t raw_first = 0;
  int64_t raw_last = 0;
  bool has_rollups = false;
  int64_t rollup_first = 0;  // the first bucket's start
  int64_t rollup_last = 0;   // the last bucket's end - 1
  // Raw rows of the session were pruned: its rollups reach further back than its raw rows.
  bool raw_pruned() const;
};
StatusOr<TierSpan> ReadTierSpan(StoreReader& reader, int64_t session);

// The timestamps (session ns) a session's rows can have: from a day before its start (a sleep
// that began earlier) to its end — its stop, or now while it records or after its tracer was
// killed — plus a day of slack for the wall clock being stepped during the session. Rows
// outside it can only come from an edited or damaged file; windows never reach them.
inline constexpr int64_t kSessionClockSlackNs = kNsPerDay;
struct PlausibleSpan {
  int64_t first_ns = 0;
  int64_t last_ns = 0;
};
StatusOr<PlausibleSpan> ReadPlausibleSpan(StoreReader& reader, int64_t session);

// 0 = the newest session that holds rows (raw or rollups; the newest when none does); NotFound
// (listing the sessions there are) when `session` is not there.
StatusOr<int64_t> ResolveSession(StoreReader& reader, int64_t session);

// Validates, finds the session and its first/last event, and applies the rule.
StatusOr<SessionWindow> ResolveWindow(StoreReader& reader, const WindowRequest& request);

// "last 2 min", "last 45 s", "12.0 s – 40.0 s".
std::string WindowLabel(int64_t from, int64_t to, bool relative);

// Seconds (an MCP argument) to ns, rounded to the nearest ns.
int64_t SecondsToNs(double seconds);

}  // namespace gw
