#include <cstdio>

#include "analysis/explain.h"
#include "cli/commands.h"
#include "store/reader.h"

namespace gw {

int RunDiff(const Args& args) {
  FlagSet flags("diff", "gpuwhy diff [flags] BEFORE.db [AFTER.db]",
                "Compares two recordings (or two sessions of one file) before and after a fix:\n"
                "context switches of the training process, run-queue wait, sync latency, CUDA\n"
                "op throughput, feed-time attribution and, where both recordings sampled NVML,\n"
                "GPU utilization, SM active, occupancy and tensor activity, each with a verdict\n"
                "(better, worse, or same within noise). With one file, compares --session-a and\n"
                "--session-b.");
  flags.Add({"session-a", FlagKind::kInt, "ID", "session of BEFORE (0 = newest)", "0"})
      .Add({"session-b", FlagKind::kInt, "ID", "session of AFTER (0 = newest)", "0"})
      .Add({"json", FlagKind::kBool, "", "print the comparison as JSON", ""});
  int code = 0;
  if (!ParseOrExit(flags, args, &code)) return code;
  const auto& pos = flags.positionals();
  if (pos.empty() || pos.size() > 2) {
    std::fprintf(stderr, "gpuwhy diff: expected BEFORE.db [AFTER.db]\n%s",
                 flags.HelpText().c_str());
    return kExitUsage;
  }
  int64_t sa = flags.GetInt("session-a", 0);
  int64_t sb = flags.GetInt("session-b", 0);
  if (pos.size() == 1 && sa == sb) {
    std::fprintf(stderr,
                 "gpuwhy diff: with one file, pick two sessions: --session-a ID "
                 "--session-b ID\n");
    return kExitUsage;
  }
  auto a = StoreReader::Open(pos[0]);
  if (!a.ok()) return ReportError(a.status());
  StatusOr<std::unique_ptr<StoreReader>> b =
      pos.size() == 2 ? StoreReader::Open(pos[1]) : StoreReader::Open(pos[0]);
  if (!b.ok()) return ReportError(b.status());
  StatusOr<DiffReport> d = Diff(**a, sa, **b, sb);
  if (!d.ok()) return ReportError(d.status());
  std::fputs((flags.GetBool("json") ? DiffToJson(*d) : DiffToText(*d)).c_str(), stdout);
  return kExitOk;
}

}  // namespace gw
