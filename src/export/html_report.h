// `gpuwhy report`: one self-contained HTML file (no scripts, no network) with explain's findings,
// the brief's Step 3 as charts with the findings' intervals shaded, feed-time attribution as
// stacked bars, the top callers, kernels and processes. Charts are inline SVG written here.
#pragma once

#include <cstdint>
#include <string>

#include "analysis/explain.h"
#include "base/status.h"
#include "export/output_file.h"
#include "store/reader.h"

namespace gw {

struct HtmlReportOptions {
  ExplainOptions explain;  // window, pid
  std::string db_path;     // shown in the report and in its evidence commands
  std::string version;     // gpuwhy version, in the footer
};

struct HtmlReportSummary {
  ReportWindow window;
  int64_t findings = 0;
  int64_t buckets = 0;    // timeline buckets charted
  int64_t bucket_s = 0;   // their length
};

StatusOr<HtmlReportSummary> WriteHtmlReport(StoreReader& reader, const HtmlReportOptions& options,
                                            OutputFile* out);

// Text made safe for HTML element content and attribute values (valid UTF-8, &<>"' escaped,
// control characters other than tab and newline dropped).
std::string HtmlEscape(const std::string& text);

}  // namespace gw
