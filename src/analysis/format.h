// Number formatting shared by findings and renderers (the brief's style: "7µs", "7.2ms",
// "14,504", "51.7%").
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace gw {

std::string FormatNs(int64_t ns);           // "7µs", "7.2ms", "1.25s"
std::string FormatSeconds(double seconds);  // "62.0"
std::string FormatPct(double share);        // 0.517 -> "51.7%"
std::string FormatCount(int64_t n);         // "14,504"
std::string FormatRate(double per_s);       // "1,200" (rounded)
std::string FormatBytes(double bytes);      // "96 MB", "1.2 GB"
std::string FormatFactor(double x);         // "1,028x", "3.4x"
// A demangled kernel name for a table: no return type, no parameter list, at most `max`
// characters ("…" marks a cut). "void at::native::k<4, F>(int, F)" → "at::native::k<4, F>".
std::string ShortKernelName(const std::string& name, size_t max = 72);
// A report's JSON as `--json` prints it: indented, invalid UTF-8 replaced, C1 controls escaped,
// one trailing newline; {"error": …} if it cannot be written.
std::string JsonText(const nlohmann::ordered_json& json);
std::string Fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace gw
