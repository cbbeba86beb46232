#include "analysis/format.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/table.h"
#include "base/text.h"

namespace gw {

std::string Fmt(const char* format, ...) {
  char buf[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  return buf;
}

std::string JsonText(const nlohmann::ordered_json& json) {
  try {
    return EscapeC1InJson(
               json.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace)) +
           "\n";
  } catch (const std::exception& e) {
    return std::string("{\"error\": \"") + JsonEscape(e.what()) + "\"}\n";
  }
}

std::string FormatNs(int64_t ns) {
  double v = static_cast<double>(ns);
  if (ns < 1000) return Fmt("%lldns", static_cast<long long>(ns));
  if (ns < 10'000) return Fmt("%.1fµs", v / 1e3);
  if (ns < 999'500) return Fmt("%.0fµs", v / 1e3);  // 999.6µs reads "1.0ms", never "1000µs"
  if (ns < 10'000'000) return Fmt("%.1fms", v / 1e6);
  if (ns < 999'500'000) return Fmt("%.0fms", v / 1e6);
  return Fmt("%.2fs", v / 1e9);
}

std::string FormatSeconds(double seconds) { return Fmt("%.1f", seconds); }

std::string FormatPct(double share) { return Fmt("%.1f%%", share * 100.0); }

std::string FormatCount(int64_t n) { return WithThousands(n); }

std::string FormatRate(double per_s) {
  if (per_s < 10) return Fmt("%.1f", per_s);
  return WithThousands(static_cast<int64_t>(std::llround(per_s)));
}

std::string FormatBytes(double bytes) {
  if (bytes >= 1e9) return Fmt("%.1f GB", bytes / 1e9);
  if (bytes >= 1e6) return Fmt("%.0f MB", bytes / 1e6);
  if (bytes >= 1e3) return Fmt("%.0f kB", bytes / 1e3);
  return Fmt("%.0f B", bytes);
}

std::string FormatFactor(double x) {
  if (x >= 100) return WithThousands(static_cast<int64_t>(std::llround(x))) + "x";
  return Fmt("%.1fx", x);
}

std::string ShortKernelName(const std::string& name, size_t max) {
  // A CUDA graph's label (sources/cuda/cuda_graphs.h) is already short: its parentheses list
  // the graph's kernels, not a parameter list.
  if (name.rfind("graph ", 0) == 0) return name;
  std::string s = name;
  if (s.rfind("void ", 0) == 0) s = s.substr(5);
  // The parameter list: the last '(' at bracket depth 0, when the name ends with its ')'.
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      if (s[i] == '(' && --depth == 0) {
        if (i > 0) s.resize(i);
        break;
      }
    }
  }
  if (s.size() > max && max > 3) {
    // Cut on a UTF-8 boundary: names are ASCII, but be safe.
    size_t cut = max - 3;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    s = s.substr(0, cut) + "…";
  }
  return s;
}

}  // namespace gw
