#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "analysis/explain.h"
#include "cli/commands.h"
#include "demo/generator.h"
#include "demo/scenarios.h"
#include "store/reader.h"

namespace gw {

void AddExplainWindowFlags(FlagSet& flags);
StatusOr<ExplainOptions> ExplainOptionsFromFlags(const FlagSet& flags);

namespace {

void ListScenarios(FILE* out) {
  std::fprintf(out, "Scenarios (gpuwhy demo <scenario>):\n");
  for (const ScenarioInfo& s : AllScenarios()) {
    std::fprintf(out, "  %-22s %s\n", s.name.c_str(), s.summary.c_str());
  }
  std::fprintf(out,
               "\nEach records a synthetic %s trace (baseline → incident → recovery) and runs\n"
               "`gpuwhy explain` on it. --keep FILE keeps the database for `gpuwhy query`.\n",
               "120 s");
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

}  // namespace

int RunDemo(const Args& args) {
  FlagSet flags("demo", "gpuwhy demo [scenario] [flags]",
                "Records a synthetic trace of a GPU training job with one injected problem\n"
                "(no root, no GPU) and explains it. With no scenario, lists them.");
  flags.Add({"keep", FlagKind::kString, "FILE", "write the recording to FILE and keep it", ""})
      .Add({"seed", FlagKind::kInt, "N", "random seed (same seed, same recording)", "1"})
      .Add({"duration", FlagKind::kDuration, "DUR", "length of the recording", "120s"});
  AddExplainWindowFlags(flags);
  int code = 0;
  if (!ParseOrExit(flags, args, &code)) return code;
  if (flags.positionals().empty()) {
    ListScenarios(stdout);
    return kExitOk;
  }
  if (flags.positionals().size() > 1) {
    std::fprintf(stderr, "gpuwhy demo: expected one scenario\n");
    return kExitUsage;
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
  std::string path = flags.GetString("keep");
  if (path.empty()) {
    StatusOr<TempDb> t = TempDb::Create();
    if (!t.ok()) return ReportError(t.status());
    temp.emplace(std::move(*t));
    path = temp->path();
  } else if (access(path.c_str(), F_OK) == 0) {
    std::fprintf(stderr, "gpuwhy demo: %s exists — the demo adds a new session to it\n",
                 path.c_str());
  }
  StatusOr<DemoStats> stats = WriteDemoDatabase(scenario, path, demo);
  if (!stats.ok()) return ReportError(stats.status());
  auto reader = StoreReader::Open(path);
  if (!reader.ok()) return ReportError(reader.status());
  StatusOr<Report> report = Explain(**reader, *options);
  if (!report.ok()) return ReportError(report.status());
  if (!flags.GetBool("json")) {
    std::printf("$ gpuwhy explain --since %llds   # demo scenario: %s (synthetic, %lld events)\n",
                static_cast<long long>(options->since_ns / 1'000'000'000), scenario.c_str(),
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
