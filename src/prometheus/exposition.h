// The Prometheus text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): one `# HELP` and one `# TYPE`
// line per family, then its samples `name{label="value",…} value`. Label values escape `\`,
// `"` and newline; HELP text escapes `\` and newline. Values are Go-parsable floats (integers
// print without an exponent; NaN, +Inf, -Inf).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gw {

inline constexpr const char* kExpositionContentType = "text/plain; version=0.0.4; charset=utf-8";

using MetricLabels = std::vector<std::pair<std::string_view, std::string>>;

std::string EscapeLabelValue(std::string_view value);
std::string EscapeHelpText(std::string_view text);
std::string FormatMetricValue(double value);

class ExpositionWriter {
 public:
  enum class Type { kCounter, kGauge, kHistogram };
  // Starts a family. Every sample of it must follow before the next family starts.
  void Family(std::string_view name, Type type, std::string_view help);
  void Sample(std::string_view name, const MetricLabels& labels, double value);
  // One histogram series: `bounds` are the buckets' upper bounds (ascending, +Inf implied),
  // `counts` the observations per bucket (not cumulative; bounds.size() + 1 of them, the
  // last for +Inf). Writes `_bucket{…,le=…}` cumulatively, `_sum` and `_count`.
  void Histogram(std::string_view name, const MetricLabels& labels,
                 const std::vector<double>& bounds, const std::vector<int64_t>& counts, double sum);
  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void Line(std::string_view name, std::string_view suffix, const MetricLabels& labels,
            const std::pair<std::string_view, std::string>* extra, double value);
  std::string out_;
};

}  // namespace gw
