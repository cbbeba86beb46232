// libFuzzer target: the flag parser and the duration/size/int parsers behind it. Input: NUL-
// separated arguments. Invariants: no crash or UB (ASan/UBSan), accepted values round-trip
// through the getters, durations and sizes are never negative.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/flags.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.emplace_back();
    } else {
      args.back() += static_cast<char>(data[i]);
    }
  }
  using gw::FlagKind;
  gw::FlagSet flags("fuzz", "fuzz", "fuzz");
  flags.Add({"d", FlagKind::kDuration, "DUR", "", ""})
      .Add({"s", FlagKind::kSize, "SIZE", "", ""})
      .Add({"i", FlagKind::kInt, "N", "", ""})
      .Add({"b", FlagKind::kBool, "", "", ""})
      .Add({"t", FlagKind::kString, "S", "", ""});
  if (flags.Parse(args).ok()) {
    if (flags.Has("d") && flags.GetDurationNs("d") < 0) __builtin_trap();
    if (flags.Has("s") && flags.GetSizeBytes("s") < 0) __builtin_trap();
    (void)flags.GetInt("i");
    (void)flags.GetBool("b");
    (void)flags.HelpText();
  }
  for (const std::string& a : args) {
    auto d = gw::ParseDurationNs(a);
    if (d.ok() && *d < 0) __builtin_trap();
    auto s = gw::ParseSizeBytes(a);
    if (s.ok() && *s < 0) __builtin_trap();
    (void)gw::ParseInt(a);
  }
  return 0;
}
