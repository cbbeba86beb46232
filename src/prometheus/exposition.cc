#include "prometheus/exposition.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace gw {

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelpText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Integers (counters) exactly, without an exponent, up to 2^53.
  if (value == std::floor(value) && std::fabs(value) < 9007199254740992.0) {
    return std::to_string(static_cast<int64_t>(value));
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);  // shortest round trip
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

void ExpositionWriter::Family(std::string_view name, Type type, std::string_view help) {
  const char* t = "gauge";
  switch (type) {
    case Type::kCounter:
      t = "counter";
      break;
    case Type::kGauge:
      t = "gauge";
      break;
    case Type::kHistogram:
      t = "histogram";
      break;
  }
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += EscapeHelpText(help);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += t;
  out_ += '\n';
}

void ExpositionWriter::Line(std::string_view name, std::string_view suffix,
                            const MetricLabels& labels,
                            const std::pair<std::string_view, std::string>* extra, double value) {
  out_ += name;
  out_ += suffix;
  if (!labels.empty() || extra) {
    out_ += '{';
    bool first = true;
    auto label = [&](std::string_view k, const std::string& v) {
      if (!first) out_ += ',';
      first = false;
      out_ += k;
      out_ += "=\"";
      out_ += EscapeLabelValue(v);
      out_ += '"';
    };
    for (const auto& [k, v] : labels) label(k, v);
    if (extra) label(extra->first, extra->second);
    out_ += '}';
  }
  out_ += ' ';
  out_ += FormatMetricValue(value);
  out_ += '\n';
}

void ExpositionWriter::Sample(std::string_view name, const MetricLabels& labels, double value) {
  Line(name, "", labels, nullptr, value);
}

void ExpositionWriter::Histogram(std::string_view name, const MetricLabels& labels,
                                 const std::vector<double>& bounds,
                                 const std::vector<int64_t>& counts, double sum) {
  int64_t cumulative = 0;
  for (size_t i = 0; i <= bounds.size(); ++i) {
    cumulative += i < counts.size() ? counts[i] : 0;
    std::pair<std::string_view, std::string> le{
        "le", i < bounds.size() ? FormatMetricValue(bounds[i]) : "+Inf"};
    Line(name, "_bucket", labels, &le, static_cast<double>(cumulative));
  }
  Line(name, "_sum", labels, nullptr, sum);
  Line(name, "_count", labels, nullptr, static_cast<double>(cumulative));
}

}  // namespace gw
