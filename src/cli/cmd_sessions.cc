#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>

#include "base/text.h"
#include "cli/commands.h"
#include "store/reader.h"
#include "store/session_admin.h"
#include "store/window.h"

namespace gw {

namespace {

std::string LocalTime(int64_t wall_ns) {
  time_t t = static_cast<time_t>(wall_ns / 1'000'000'000);
  struct tm tm {};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string StateText(const SessionSummary& s) {
  switch (StateOf(s)) {
    case SessionState::kEnded:
      return "ended";
    case SessionState::kRecording:
      return "recording (pid " + std::to_string(s.tracer_pid) + ")";
    case SessionState::kInterrupted:
      return "interrupted";
  }
  return "?";
}

// The command that recorded the session (credentials already redacted by the reader), its
// program as a file name, cut at 80 characters ("…"): --json has all of it.
std::string CommandText(const std::string& command_line) {
  std::string text = command_line;
  size_t end = text.find(' ');
  size_t slash = text.rfind('/', end == std::string::npos ? std::string::npos : end);
  if (slash != std::string::npos) text = text.substr(slash + 1);
  text = TerminalSafe(text);
  constexpr size_t kMax = 80;
  if (text.size() > kMax) {
    size_t cut = kMax;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text = text.substr(0, cut) + "\u2026";
  }
  return text.empty() ? "-" : text;
}

}  // namespace

int RunSessions(const Args& args) {
  FlagSet flags("sessions", "gpuwhy sessions [flags]",
                "Lists the recording sessions in a database, oldest first: id, kind, start\n"
                "time, span, events, drops, the share of the file its rows take, and whether\n"
                "it ended cleanly (\"interrupted\": its tracer stopped without closing it, e.g.\n"
                "kill -9; \"recording\": a tracer on this host is still writing it), and the\n"
                "command that recorded it (passwords, tokens and other secrets shown as ***).\n"
                "`gpuwhy prune` removes old sessions.");
  AddDbFlag(flags);
  flags.Add({"json", FlagKind::kBool, "", "print the sessions as JSON", ""});
  int code = 0;
  if (!ParseOrExit(flags, args, &code)) return code;
  if (!flags.positionals().empty()) {
    std::fprintf(stderr, "gpuwhy sessions: unexpected argument '%s'\n%s",
                 flags.positionals()[0].c_str(), flags.HelpText().c_str());
    return kExitUsage;
  }
  auto reader = StoreReader::Open(DatabasePath(flags));
  if (!reader.ok()) return ReportError(reader.status());
  auto sessions = (*reader)->Sessions();
  if (!sessions.ok()) return ReportError(sessions.status());
  auto usage = ReadDatabaseUsage(**reader);
  if (!usage.ok()) return ReportError(usage.status());
  const std::string& path = (*reader)->path();

  // Tiered retention: where each session's raw rows begin once --max-db pruned the oldest.
  std::map<int64_t, TierSpan> spans;
  for (const SessionSummary& s : *sessions) {
    auto span = ReadTierSpan(**reader, s.id);
    if (!span.ok()) return ReportError(span.status());
    spans[s.id] = *span;
  }
  // "all", "last 8.1 h" (older raw rows pruned, rollups kept), "none" (rollups only).
  auto raw_text = [&](int64_t id) -> std::string {
    const TierSpan& t = spans[id];
    if (!t.raw_pruned()) return "all";
    if (!t.has_raw) return "none";
    int64_t kept = std::max(t.raw_last, t.rollup_last) + 1 - t.raw_first;
    return "last " + HumanSpan((kept + 500'000'000) / 1'000'000'000 * 1'000'000'000);
  };
  if (flags.GetBool("json")) {
    std::string out = "{\"database\": \"" + JsonEscape(path) +
                      "\", \"file_bytes\": " + std::to_string(usage->file_bytes) +
                      ", \"wal_bytes\": " + std::to_string(usage->wal_bytes) +
                      ", \"free_bytes\": " + std::to_string(usage->free_pages * usage->page_bytes) +
                      ", \"sessions\": [";
    for (size_t i = 0; i < sessions->size(); ++i) {
      const SessionSummary& s = (*sessions)[i];
      auto rows = usage->rows_by_session.find(s.id);
      out += std::string(i ? ",\n  " : "\n  ") + "{\"id\": " + std::to_string(s.id) +
             ", \"kind\": \"" + JsonEscape(s.kind) +
             "\", \"wall_start_ns\": " + std::to_string(s.wall_start_ns) +
             ", \"wall_stop_ns\": " + std::to_string(s.wall_stop_ns) +
             ", \"span_ns\": " + std::to_string(s.wall_stop_ns - s.wall_start_ns) +
             ", \"events\": " + std::to_string(s.events) + ", \"stored_events\": " +
             std::to_string(rows == usage->rows_by_session.end() ? 0 : rows->second) +
             ", \"drops\": " + std::to_string(s.drops) +
             ", \"estimated_bytes\": " + std::to_string(usage->EstimatedSessionBytes(s.id)) +
             ", \"raw_rows_pruned\": " + (spans[s.id].raw_pruned() ? "true" : "false") +
             ", \"raw_first_ts\": " +
             (spans[s.id].has_raw ? std::to_string(spans[s.id].raw_first) : "null") +
             ", \"rollups_first_ts\": " +
             (spans[s.id].has_rollups ? std::to_string(spans[s.id].rollup_first) : "null") +
             ", \"state\": \"" + SessionStateName(StateOf(s)) +
             "\", \"ended_cleanly\": " + (s.ended ? "true" : "false") +
             ", \"tracer_pid\": " + std::to_string(s.tracer_pid) + ", \"host\": \"" +
             JsonEscape(s.host) + "\", \"command_line\": \"" + JsonEscape(s.command_line) + "\"}";
    }
    out += sessions->empty() ? "]}\n" : "\n]}\n";
    std::fputs(EscapeC1InJson(out).c_str(), stdout);
    return kExitOk;
  }

  std::printf("%s: %s", TerminalSafe(path).c_str(), HumanBytes(usage->file_bytes).c_str());
  if (usage->wal_bytes > 0) std::printf(" + %s WAL", HumanBytes(usage->wal_bytes).c_str());
  if (usage->free_pages > 0) {
    std::printf(" (%s free inside, reused before the file grows)",
                HumanBytes(usage->free_pages * usage->page_bytes).c_str());
  }
  std::printf(", %zu session%s\n", sessions->size(), sessions->size() == 1 ? "" : "s");
  if (sessions->empty()) return kExitOk;
  Table table;
  table.columns = {"session", "kind",     "started", "span",   "events",
                   "drops",   "~size",    "raw rows", "state", "command"};
  int64_t used = (usage->pages - usage->free_pages) * usage->page_bytes;
  for (const SessionSummary& s : *sessions) {
    int64_t bytes = usage->EstimatedSessionBytes(s.id);
    std::string size = HumanBytes(bytes);
    if (used > 0) size += " (" + std::to_string(bytes * 100 / used) + "%)";
    table.rows.push_back({std::to_string(s.id), TerminalSafe(s.kind), LocalTime(s.wall_start_ns),
                          HumanSpan(s.wall_stop_ns - s.wall_start_ns), WithThousands(s.events),
                          WithThousands(s.drops), size, raw_text(s.id), StateText(s),
                          CommandText(s.command_line)});
  }
  std::fputs(FormatTable(table, TableFormat::kText).c_str(), stdout);
  return kExitOk;
}

}  // namespace gw
