// libFuzzer target: the sanitizers every untrusted string is printed through. Invariants: the
// output is valid UTF-8 and holds no control byte a terminal obeys; JSON escaping yields valid
// UTF-8; sanitizing twice changes nothing.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/table.h"
#include "base/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  std::string safe = gw::TerminalSafe(in);
  if (!gw::IsTerminalSafe(safe)) __builtin_trap();
  if (gw::TerminalSafe(safe) != safe) __builtin_trap();
  std::string utf8 = gw::ValidUtf8(in);
  if (gw::ValidUtf8(utf8) != utf8) __builtin_trap();
  std::string json = gw::JsonEscape(in);
  if (gw::ValidUtf8(json) != json) __builtin_trap();
  for (unsigned char c : json) {
    if (c < 0x20 || c == 0x7f) __builtin_trap();
  }
  std::string csv = gw::CsvField(in);
  for (unsigned char c : csv) {
    if ((c < 0x20 && c != '\n') || c == 0x7f || c == 0x1b) __builtin_trap();
  }
  return 0;
}
