#include "analysis/format.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "base/table.h"

namespace gw {

std::string Fmt(const char* format, ...) {
  char buf[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  return buf;
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

}  // namespace gw
