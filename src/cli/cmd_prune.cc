#include <cstdio>
#include <ctime>

#include "base/text.h"
#include "cli/commands.h"
#include "store/reader.h"
#include "store/session_admin.h"

namespace gw {

int RunPrune(const Args& args) {
  FlagSet flags("prune", "gpuwhy prune [flags] (--keep N | --older-than DUR)",
                "Removes old recording sessions from a database and gives their space back to\n"
                "the filesystem. With --keep and --older-than together, a session is removed\n"
                "only when both select it. A database that a tracer on this host is still\n"
                "writing is refused (stop the tracer first; `trace --max-db` bounds a running\n"
                "recording). `gpuwhy sessions` lists what is there.");
  AddDbFlag(flags);
  flags.Add({"keep", FlagKind::kInt, "N", "keep the newest N sessions, remove the older ones", ""})
      .Add({"older-than", FlagKind::kDuration, "DUR",
            "remove sessions that ended more than DUR ago (7d, 12h, 30m)", ""})
      .Add({"dry-run", FlagKind::kBool, "", "print what would be removed and change nothing", ""});
  int code = 0;
  if (!ParseOrExit(flags, args, &code)) return code;
  if (!flags.positionals().empty()) {
    std::fprintf(stderr, "gpuwhy prune: unexpected argument '%s'\n%s",
                 flags.positionals()[0].c_str(), flags.HelpText().c_str());
    return kExitUsage;
  }
  bool by_count = flags.Has("keep");
  bool by_age = flags.Has("older-than");
  if (!by_count && !by_age) {
    std::fprintf(stderr,
                 "gpuwhy prune: say what to remove with --keep N and/or --older-than DUR\n%s",
                 flags.HelpText().c_str());
    return kExitUsage;
  }
  int64_t keep = flags.GetInt("keep", 0);
  if (by_count && keep < 0) {
    std::fprintf(stderr, "gpuwhy prune: --keep must be 0 or more\n");
    return kExitUsage;
  }
  int64_t older_ns = flags.GetDurationNs("older-than", 0);
  if (by_age && older_ns <= 0) {
    std::fprintf(stderr, "gpuwhy prune: --older-than must be more than 0\n");
    return kExitUsage;
  }
  bool dry_run = flags.GetBool("dry-run", false);
  const std::string path = DatabasePath(flags);

  std::vector<SessionSummary> sessions;
  DatabaseUsage usage;
  {
    auto reader = StoreReader::Open(path);
    if (!reader.ok()) return ReportError(reader.status());
    auto listed = (*reader)->Sessions();
    if (!listed.ok()) return ReportError(listed.status());
    sessions = std::move(*listed);
    auto read = ReadDatabaseUsage(**reader);
    if (!read.ok()) return ReportError(read.status());
    usage = std::move(*read);
  }  // the read-only handle is closed before the file is written

  int64_t now_ns = static_cast<int64_t>(std::time(nullptr)) * 1'000'000'000;
  std::vector<const SessionSummary*> doomed;
  const SessionSummary* recording = nullptr;
  for (size_t i = 0; i < sessions.size(); ++i) {
    const SessionSummary& s = sessions[i];
    if (StateOf(s) == SessionState::kRecording) {
      recording = &s;
      continue;  // never removed
    }
    bool old_by_count = !by_count || static_cast<int64_t>(sessions.size() - i) > keep;
    bool old_by_age = !by_age || s.wall_stop_ns < now_ns - older_ns;
    if (old_by_count && old_by_age) doomed.push_back(&s);
  }
  // The file is not touched while a tracer writes it (its session is never a candidate, and
  // a long delete would stall its commits into BPF drops); --dry-run only reads.
  if (recording != nullptr && !dry_run) {
    return ReportError(FailedPrecondition(
        "database " + path + " is being written: session " + std::to_string(recording->id) +
        " is recorded by gpuwhy pid " + std::to_string(recording->tracer_pid) +
        " — hint: stop that tracer first (sudo systemctl stop gpuwhy-recorder, or Ctrl-C); a "
        "running recording stays bounded by its `trace --max-db`"));
  }
  if (doomed.empty()) {
    std::printf("nothing to remove: %s holds %zu session%s and none matches\n",
                TerminalSafe(path).c_str(), sessions.size(), sessions.size() == 1 ? "" : "s");
    return kExitOk;
  }
  int64_t events = 0;
  int64_t bytes = 0;
  std::string ids;
  for (const SessionSummary* s : doomed) {
    auto rows = usage.rows_by_session.find(s->id);
    events += rows == usage.rows_by_session.end() ? 0 : rows->second;
    bytes += usage.EstimatedSessionBytes(s->id);
    ids += (ids.empty() ? "" : ", ") + std::to_string(s->id);
  }
  if (dry_run) {
    std::printf("would remove %zu of %zu sessions from %s: %s (%s events, about %s)\n",
                doomed.size(), sessions.size(), TerminalSafe(path).c_str(), ids.c_str(),
                WithThousands(events).c_str(), HumanBytes(bytes).c_str());
    if (recording != nullptr) {
      std::printf(
          "but session %lld is being recorded (tracer pid %d): without --dry-run this "
          "database is refused until that tracer stops\n",
          static_cast<long long>(recording->id), recording->tracer_pid);
    }
    std::printf("dry run: nothing was changed\n");
    return kExitOk;
  }
  std::vector<int64_t> id_list;
  for (const SessionSummary* s : doomed) id_list.push_back(s->id);
  auto result = DeleteSessions(path, id_list);
  if (!result.ok()) return ReportError(result.status());
  std::printf("removed %lld of %zu sessions from %s: %s (%s events)\n",
              static_cast<long long>(result->sessions_removed), sessions.size(),
              TerminalSafe(path).c_str(), ids.c_str(), WithThousands(result->rows_removed).c_str());
  if (result->space_returned) {
    std::printf("the file went from %s to %s\n", HumanBytes(result->bytes_before).c_str(),
                HumanBytes(result->bytes_after).c_str());
  } else {
    std::printf(
        "the file stays %s: it was made without incremental auto-vacuum, so the freed "
        "pages are kept and reused by later recordings — hint: `sqlite3 %s VACUUM` "
        "shrinks it while nothing writes it\n",
        HumanBytes(result->bytes_after).c_str(), TerminalSafe(path).c_str());
  }
  return kExitOk;
}

}  // namespace gw
