#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "export/folded_export.h"
#include "export/output_file.h"
#include "export/perfetto_export.h"
#include "store/reader.h"

namespace gw {

namespace {

constexpr const char* kFormats = "perfetto, folded";

// The window flags mean what they mean for explain (store/window.h), but the default is the
// whole session: an export is for looking around.
StatusOr<WindowRequest> ExportWindowFromFlags(const FlagSet& flags) {
  WindowRequest w;
  if (flags.Has("since")) w.since_ns = flags.GetDurationNs("since");
  if (flags.Has("from")) w.from_ns = flags.GetDurationNs("from");
  if (flags.Has("to")) w.to_ns = flags.GetDurationNs("to");
  w.session = flags.GetInt("session", 0);
  RETURN_IF_ERROR(ValidateWindowRequest(w));
  return w;
}

// Progress on stderr for exports that take more than a second, at most once a second.
class Progress {
 public:
  void operator()(int64_t done, int64_t total) {
    auto now = std::chrono::steady_clock::now();
    if (now - start_ < std::chrono::seconds(1) || now - last_ < std::chrono::seconds(1)) {
      if (done < total || !printed_) return;
    }
    last_ = now;
    printed_ = true;
    std::fprintf(stderr, "gpuwhy export: %lld of %lld rows (%d%%)\n", static_cast<long long>(done),
                 static_cast<long long>(total),
                 total > 0 ? static_cast<int>(done * 100 / total) : 100);
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_ = start_;
  bool printed_ = false;
};

}  // namespace

int RunExport(const Args& args) {
  FlagSet flags("export", "gpuwhy export --format perfetto|folded -o FILE [flags]",
                "Writes one window of a recording (default: the whole session) for other tools:\n"
                "  perfetto  a Perfetto trace (ui.perfetto.dev, trace_processor): a track per\n"
                "            thread grouped by process with its CUDA calls and its states\n"
                "            (running, runnable, blocked, I/O, page fault), CUDA launches/s\n"
                "            counters, who preempted traced threads on which CPU, explain's\n"
                "            findings and a note stating drops; wall-clock timestamps.\n"
                "  folded    folded stacks (frame;frame;frame count) for flamegraph.pl,\n"
                "            speedscope or inferno: off-CPU samples by default (`trace\n"
                "            --stack`), on-CPU samples with --op on-cpu (the profile trace\n"
                "            records by default), or the callers of --op (`trace --stack`).\n"
                "Reads the database read-only; the file appears only when complete.\n"
                "docs/export.md describes both formats.");
  AddDbFlag(flags);
  AddOutputFlags(flags);
  flags.Add({"format", FlagKind::kString, "FMT", std::string("output format: ") + kFormats, ""})
      .Add({"since", FlagKind::kDuration, "DUR",
            "only the last DUR, ending at the newest event (or --to)", ""})
      .Add({"from", FlagKind::kDuration, "DUR",
            "window start, as time since the session started (e.g. 30s)", ""})
      .Add({"to", FlagKind::kDuration, "DUR", "window end, as time since the session started",
            "newest event"})
      .Add({"session", FlagKind::kInt, "ID", "session to export (0 = newest)", "0"})
      .Add({"pid", FlagKind::kInt, "PID", "only this process and its descendants (0 = all)", "0"})
      .Add({"no-findings", FlagKind::kBool, "",
            "perfetto: leave out explain's findings (skips the analysis)", ""})
      .Add({"op", FlagKind::kString, "OP[,OP]",
            "folded: fold the stacks of these ops instead of off-CPU samples: on-cpu (the "
            "on-CPU profile), cudaStreamSync or cudaStreamSynchronize, ...",
            "off-cpu"})
      .Add({"weight", FlagKind::kString, "W",
            "folded: count (rows) or time (their summed duration, µs; on-cpu: samples × the "
            "sampling period)",
            "count"});
  int code = 0;
  if (!ParseOrExit(flags, args, &code)) return code;
  auto usage = [&](const std::string& message) {
    std::fprintf(stderr, "gpuwhy export: %s\n%s", message.c_str(), flags.HelpText().c_str());
    return kExitUsage;
  };
  if (!flags.positionals().empty()) {
    return usage("unexpected argument '" + flags.positionals()[0] + "'");
  }
  std::string format = flags.GetString("format");
  if (format.empty()) return usage(std::string("--format is required: ") + kFormats);
  if (format != "perfetto" && format != "folded") {
    return usage("unknown --format '" + format + "': choose " + kFormats);
  }
  std::string path_error;
  std::string path = OutputPath(flags, &path_error);
  if (path.empty()) return usage(path_error);
  if (path == "-" && format == "perfetto" && isatty(STDOUT_FILENO)) {
    return usage("a Perfetto trace is binary: give -o FILE, or redirect standard output");
  }
  int64_t pid = flags.GetInt("pid", 0);
  if (pid < 0 || pid > 0x7fffffff) return usage("--pid must be a process id");
  if (format == "perfetto" && (flags.Has("op") || flags.Has("weight"))) {
    return usage("--op and --weight apply to --format folded");
  }
  if (format == "folded" && flags.Has("no-findings")) {
    return usage("--no-findings applies to --format perfetto");
  }
  StatusOr<WindowRequest> window = ExportWindowFromFlags(flags);
  if (!window.ok()) return ReportError(window.status());

  FoldedExportOptions folded;
  if (format == "folded") {
    std::string ops = flags.GetString("op", "off-cpu");
    size_t start = 0;
    while (start <= ops.size()) {
      size_t comma = ops.find(',', start);
      std::string name =
          ops.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      std::optional<Op> op = FoldedOpFromName(name);
      if (!op) {
        return usage("unknown --op '" + name +
                     "' — hint: `gpuwhy query \"SELECT name FROM op_names\"` lists them");
      }
      folded.ops.push_back(*op);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    std::string weight = flags.GetString("weight", "count");
    if (weight != "count" && weight != "time") {
      return usage("unknown --weight '" + weight + "': choose count or time");
    }
    folded.weight = weight == "time" ? FoldedWeight::kTimeUs : FoldedWeight::kCount;
    folded.window = *window;
    folded.pid = static_cast<int32_t>(pid);
  }

  auto reader = StoreReader::Open(DatabasePath(flags));
  if (!reader.ok()) return ReportError(reader.status());
  auto out = OutputFile::Create(path, OutputFile::ModeOf(DatabasePath(flags)));
  if (!out.ok()) return ReportError(out.status());
  const std::string shown = path == "-" ? "standard output" : path;

  if (format == "folded") {
    StatusOr<FoldedExportSummary> sum = ExportFolded(**reader, folded, out->get());
    if (!sum.ok()) return ReportError(sum.status());
    if (sum->lines == 0) {  // an empty file would read as "no time went anywhere": write none
      std::fprintf(stderr,
                   "gpuwhy export: nothing written to %s: %s of session %lld holds no %s with "
                   "a stack%s — hint: stacks are recorded by `gpuwhy trace --stack`, on-CPU samples "
                   "by `gpuwhy trace` (--op on-cpu); --op picks other ops (off-cpu, "
                   "cudaStreamSync, …)\n",
                   shown.c_str(), sum->window.label.c_str(),
                   static_cast<long long>(sum->window.session),
                   sum->rows == 0 ? "rows" : "readable stacks",
                   pid != 0 ? (" for --pid " + std::to_string(pid)).c_str() : "");
      return kExitError;
    }
    Status st = (*out)->Commit();
    if (!st.ok()) return ReportError(st);
    std::fprintf(stderr, "gpuwhy export: wrote %lld folded stacks (%lld rows, %s) to %s\n",
                 static_cast<long long>(sum->lines), static_cast<long long>(sum->rows),
                 sum->window.label.c_str(), shown.c_str());
    if (sum->malformed > 0) {
      std::fprintf(stderr, "gpuwhy export: %lld stored stacks could not be read (skipped)\n",
                   static_cast<long long>(sum->malformed));
    }
    return kExitOk;
  }

  PerfettoExportOptions options;
  options.window = *window;
  options.pid = static_cast<int32_t>(pid);
  options.findings = !flags.GetBool("no-findings");
  Progress progress;
  options.progress = [&](int64_t done, int64_t total) { progress(done, total); };
  StatusOr<PerfettoExportSummary> sum = ExportPerfetto(**reader, options, out->get());
  if (!sum.ok()) return ReportError(sum.status());
  Status st = (*out)->Commit();
  if (!st.ok()) return ReportError(st);
  std::fprintf(stderr,
               "gpuwhy export: wrote %s (%s): %lld tracks, %lld slices (%lld CUDA calls), %lld "
               "counter values, %lld findings, %s to %s\n",
               HumanBytes((*out)->bytes_written()).c_str(), sum->window.label.c_str(),
               static_cast<long long>(sum->tracks), static_cast<long long>(sum->slices),
               static_cast<long long>(sum->cuda_slices),
               static_cast<long long>(sum->counter_values), static_cast<long long>(sum->findings),
               sum->drops == 0
                   ? "no drops"
                   : (std::to_string(sum->drops) + " events dropped while recording").c_str(),
               shown.c_str());
  if (!sum->explain_error.empty()) {
    std::fprintf(stderr, "gpuwhy export: no findings in the trace: %s\n",
                 sum->explain_error.c_str());
  }
  return kExitOk;
}

}  // namespace gw
