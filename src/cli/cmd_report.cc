#include <cstdio>

#include "analysis/explain.h"
#include "cli/commands.h"
#include "export/html_report.h"
#include "export/output_file.h"
#include "store/reader.h"

namespace gw {

int RunReport(const Args& args) {
  FlagSet flags("report", "gpuwhy report -o FILE.html [flags]",
                "Writes one self-contained HTML file to attach to a ticket: explain's causal\n"
                "chains with their evidence, the host's activity as charts (context switches,\n"
                "sync latency, CUDA calls and, where NVML was sampled, GPU SM activity) with\n"
                "the seconds each finding's cause held the main thread shaded, feed-time\n"
                "attribution as stacked bars, the top callers (trace --stack), kernels and\n"
                "processes. No scripts and nothing loaded from the network. The window is\n"
                "explain's. Reads the database read-only; the file appears only when complete.");
  AddDbFlag(flags);
  AddOutputFlags(flags);
  AddExplainWindowFlags(flags, /*output_flags=*/false);
  int code = 0;
  if (!ParseOrExit(flags, args, &code)) return code;
  auto usage = [&](const std::string& message) {
    std::fprintf(stderr, "gpuwhy report: %s\n%s", message.c_str(), flags.HelpText().c_str());
    return kExitUsage;
  };
  if (!flags.positionals().empty()) {
    return usage("unexpected argument '" + flags.positionals()[0] + "'");
  }
  std::string path_error;
  std::string path = OutputPath(flags, &path_error);
  if (path.empty()) return usage(path_error);
  StatusOr<ExplainOptions> explain = ExplainOptionsFromFlags(flags);
  if (!explain.ok()) return ReportError(explain.status());
  HtmlReportOptions options;
  options.explain = *explain;
  options.db_path = DatabasePath(flags);
  options.version = VersionString();
  auto reader = StoreReader::Open(options.db_path);
  if (!reader.ok()) return ReportError(reader.status());
  auto out = OutputFile::Create(path, OutputFile::ModeOf(options.db_path));
  if (!out.ok()) return ReportError(out.status());
  StatusOr<HtmlReportSummary> sum = WriteHtmlReport(**reader, options, out->get());
  if (!sum.ok()) return ReportError(sum.status());
  Status st = (*out)->Commit();
  if (!st.ok()) return ReportError(st);
  std::fprintf(stderr,
               "gpuwhy report: wrote %s (%s, %lld finding%s, %lld chart buckets of %lld s)\n",
               path == "-" ? "standard output" : path.c_str(), sum->window.label.c_str(),
               static_cast<long long>(sum->findings), sum->findings == 1 ? "" : "s",
               static_cast<long long>(sum->buckets), static_cast<long long>(sum->bucket_s));
  return kExitOk;
}

}  // namespace gw
