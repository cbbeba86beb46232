#include <cstdio>

#include "cli/commands.h"

namespace gw {

int RunVersion(const Args& args) {
  FlagSet flags("version", "gpuwhy version", "Prints the gpuwhy version.");
  int code = 0;
  if (!ParseOrExit(flags, args, &code)) return code;
  std::printf("gpuwhy %s\n", VersionString().c_str());
  return kExitOk;
}

}  // namespace gw
