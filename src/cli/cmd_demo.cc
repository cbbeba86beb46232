// gpuwhy demo: a synthetic recording (src/demo/generator.h) or, with --live, a real one of a
// workload on the simulated runtime (src/demo/live.h), explained.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "analysis/explain.h"
#include "cli/commands.h"
#include "demo/generator.h"
#include "demo/live.h"
#include "demo/scenarios.h"
#include "store/reader.h"

namespace gw {

namespace {

std::atomic<bool> g_live_stop{false};

void OnLiveStopSignal(int) { g_live_stop.store(true); }

void ListLiveScenarios(FILE* out) {
  std::fprintf(out,
               "Live scenarios (sudo gpuwhy demo --live <scenario>; default cpu-contention):\n");
  for (const LiveScenario& s : LiveScenarios()) {
    std::fprintf(out, "  %-22s %s\n", s.name, s.summary);
  }
}

void ListScenarios(FILE* out) {
  std::fprintf(out, "Scenarios (gpuwhy demo <scenario>):\n");
  for (const ScenarioInfo& s : AllScenarios()) {
    std::fprintf(out, "  %-22s %s\n", s.name.c_str(), s.summary.c_str());
  }
  std::fprintf(out,
               "\nEach records a synthetic %s trace (baseline → incident → recovery) and runs\n"
               "`gpuwhy explain` on it. --keep FILE keeps the database for `gpuwhy query`.\n",
               "120 s");
  std::fprintf(out,
               "\nAs root, --live runs a real workload on the simulated CUDA runtime with the fault\n"
               "really injected, traces it with eBPF and explains it (this is `make demo`):\n"
               "  sudo gpuwhy demo --live [scenario]    (default cpu-contention, --duration 20s)\n");
  ListLiveScenarios(out);
}

// A private temporary file that is removed when this goes out of scope.
class TempDb {
 public:
  static StatusOr<TempDb> Create() {
    const char* dir = std::getenv("TMPDIR");
    std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/gpuwhy-demo-XXXXXX";
    int fd = mkstemp(tmpl.data());
    if (fd < 0) return ErrnoStatus("create temporary database " + tmpl, errno);
    close(fd);
    unlink(tmpl.c_str());  // the writer creates it fresh
    return TempDb(tmpl);
  }
  TempDb(TempDb&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  TempDb(const TempDb&) = delete;
  TempDb& operator=(const TempDb&) = delete;
  TempDb& operator=(TempDb&&) = delete;
  ~TempDb() {
    if (path_.empty()) return;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      unlink((path_ + suffix).c_str());
    }
  }
  const std::string& path() const { return path_; }

 private:
  explicit TempDb(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// The database a demo records into: --keep FILE (a note when it already exists: the demo
// adds a session), else a temporary file removed when `temp` goes away.
StatusOr<std::string> DemoDatabasePath(const FlagSet& flags, std::optional<TempDb>* temp) {
  std::string path = flags.GetString("keep");
  if (path.empty()) {
    StatusOr<TempDb> t = TempDb::Create();
    if (!t.ok()) return t.status();
    temp->emplace(std::move(*t));
    return (*temp)->path();
  }
  if (access(path.c_str(), F_OK) == 0) {
    std::fprintf(stderr, "gpuwhy demo: %s exists — the demo adds a new session to it\n",
                 path.c_str());
  }
  return path;
}

// The live demo (src/demo/live.h) records; this explains the recording like `gpuwhy explain`.
int RunLiveDemo(const FlagSet& flags, const std::string& scenario_name,
                const ExplainOptions& options) {
  const LiveScenario* scenario = FindLiveScenario(scenario_name);
  if (scenario == nullptr) {
    std::fprintf(stderr, "gpuwhy demo: unknown live scenario '%s'\n\n", scenario_name.c_str());
    ListLiveScenarios(stderr);
    return kExitUsage;
  }
  LiveDemoOptions live;
  live.scenario = scenario;
  live.duration_ns = flags.GetDurationNs("duration", 20'000'000'000);
  if (Status st = CheckLiveDemoCanRun(*scenario, live.duration_ns); !st.ok()) {
    return ReportError(st);
  }
  bool json = flags.GetBool("json");

  std::optional<TempDb> temp;
  StatusOr<std::string> path_or = DemoDatabasePath(flags, &temp);
  if (!path_or.ok()) return ReportError(path_or.status());
  std::string path = *path_or;
  live.db_path = path;
  live.version = VersionString();
  live.command_line = CommandLine();
  live.interrupt = &g_live_stop;
  live.progress = [](const std::string& line) {
    std::fprintf(stderr, "gpuwhy demo --live: %s\n", line.c_str());
  };
  struct sigaction sa {};
  sa.sa_handler = OnLiveStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  StatusOr<LiveDemoRecording> recording = RecordLiveDemo(live);
  if (!recording.ok()) return ReportError(recording.status());
  if (recording->interrupted) {
    std::fprintf(stderr, "gpuwhy demo --live: interrupted; workload stopped\n");
    return 130;  // 128 + SIGINT, like a shell
  }

  std::fprintf(stderr, "gpuwhy demo --live: explaining…\n");
  auto reader = StoreReader::Open(path);
  if (!reader.ok()) return ReportError(reader.status());
  StatusOr<Report> report = Explain(**reader, options);
  if (!report.ok()) return ReportError(report.status());
  if (!json) {
    std::printf(
        "$ gpuwhy explain --since %llds   # live demo: %s (real eBPF, simulated GPU, "
        "%lld events)\n",
        static_cast<long long>(options.window.since_ns.value_or(kDefaultSinceNs) / 1'000'000'000),
        scenario->name, static_cast<long long>(recording->events));
  }
  std::string text = json ? ReportToJson(*report) : ReportToText(*report);
  std::fputs(text.c_str(), stdout);
  if (temp.has_value()) {
    if (!json) {
      std::printf("\n(demo database removed; keep it with --keep FILE to run `gpuwhy query`)\n");
    }
  } else {
    std::fprintf(stderr, "gpuwhy demo: recording kept in %s (session %lld)\n", path.c_str(),
                 static_cast<long long>(recording->session_id));
  }
  return kExitOk;
}

}  // namespace

int RunDemo(const Args& args) {
  FlagSet flags("demo", "gpuwhy demo [scenario] [flags]",
                "Records a synthetic trace of a GPU training job with one injected problem\n"
                "(no root, no GPU) and explains it. With no scenario, lists them.\n\n"
                "With --live (needs root; no GPU): runs gw_train_loop on the simulated CUDA\n"
                "runtime built next to this gpuwhy (<dir of gpuwhy>/sim/bin and sim/lib) with\n"
                "the fault really injected, traces it with eBPF through the same capture path\n"
                "as `gpuwhy trace` (into a temporary database, or --keep FILE) and explains it.\n"
                "Live scenarios (default cpu-contention):\n"
                "  cpu-contention     loop pinned to one CPU; from a third of the way in, 3\n"
                "                     gw_competitor burners named noisy_neighbor on that CPU\n"
                "  healthy            the same loop, light and not pinned, nothing injected\n"
                "  memcpy-bottleneck  64 MB batches copied from pageable host memory\n"
                "  io-bottleneck      the worker reads 32 MB batches with O_DIRECT from a cold\n"
                "                     256 MB file in /var/tmp (removed afterwards), its disk's\n"
                "                     reads capped at 128 MB/s for the workload (cgroup v1 blkio)\n"
                "Progress goes to stderr. Every process it starts is stopped when it ends,\n"
                "including on Ctrl-C (exit 130). --seed applies to synthetic scenarios only.");
  flags.Add({"keep", FlagKind::kString, "FILE", "write the recording to FILE and keep it", ""})
      .Add({"seed", FlagKind::kInt, "N", "random seed (same seed, same recording)", "1"})
      .Add({"live", FlagKind::kBool, "",
            "run and trace a real workload on the simulated GPU instead (root)", ""})
      .Add({"duration", FlagKind::kDuration, "DUR", "length of the recording",
            "120s, 30s to 1h; with --live 20s, at least 5s"});
  AddExplainWindowFlags(flags);
  int code = 0;
  if (!ParseOrExit(flags, args, &code)) return code;
  bool live = flags.GetBool("live");
  if (flags.positionals().empty() && !live) {
    ListScenarios(stdout);
    return kExitOk;
  }
  if (flags.positionals().size() > 1) {
    std::fprintf(stderr, "gpuwhy demo: expected one scenario\n");
    return kExitUsage;
  }
  if (live) {
    StatusOr<ExplainOptions> live_options = ExplainOptionsFromFlags(flags);
    if (!live_options.ok()) return ReportError(live_options.status());
    return RunLiveDemo(flags, flags.positionals().empty() ? "cpu-contention"
                                                          : flags.positionals()[0],
                       *live_options);
  }
  const std::string& scenario = flags.positionals()[0];
  if (FindScenario(scenario) == nullptr) {
    std::fprintf(stderr, "gpuwhy demo: unknown scenario '%s'\n\n", scenario.c_str());
    ListScenarios(stderr);
    return kExitUsage;
  }
  StatusOr<ExplainOptions> options = ExplainOptionsFromFlags(flags);
  if (!options.ok()) return ReportError(options.status());
  DemoOptions demo;
  demo.seed = static_cast<uint64_t>(flags.GetInt("seed", 1));
  demo.duration_s = flags.GetDurationNs("duration", 120'000'000'000) / 1'000'000'000;

  std::optional<TempDb> temp;
  StatusOr<std::string> path_or = DemoDatabasePath(flags, &temp);
  if (!path_or.ok()) return ReportError(path_or.status());
  std::string path = *path_or;
  StatusOr<DemoStats> stats = WriteDemoDatabase(scenario, path, demo);
  if (!stats.ok()) return ReportError(stats.status());
  auto reader = StoreReader::Open(path);
  if (!reader.ok()) return ReportError(reader.status());
  StatusOr<Report> report = Explain(**reader, *options);
  if (!report.ok()) return ReportError(report.status());
  if (!flags.GetBool("json")) {
    std::printf("$ gpuwhy explain --since %llds   # demo scenario: %s (synthetic, %lld events)\n",
                static_cast<long long>(options->window.since_ns.value_or(kDefaultSinceNs) /
                                            1'000'000'000), scenario.c_str(),
                static_cast<long long>(stats->events));
  }
  std::string text = flags.GetBool("json") ? ReportToJson(*report) : ReportToText(*report);
  std::fputs(text.c_str(), stdout);
  if (temp.has_value()) {
    if (!flags.GetBool("json")) {
      std::printf("\n(demo database removed; keep it with --keep FILE to run `gpuwhy query`)\n");
    }
  } else {
    std::fprintf(stderr, "gpuwhy demo: recording kept in %s (session %lld)\n", path.c_str(),
                 static_cast<long long>(stats->session));
  }
  return kExitOk;
}

}  // namespace gw
