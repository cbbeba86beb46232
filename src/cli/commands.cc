#include "cli/commands.h"

namespace gw {

const std::vector<Command>& AllCommands() {
  static const std::vector<Command> kCommands = {
      {"check", "check that this machine can trace (BPF, BTF, privileges, CUDA libraries)",
       RunCheck},
      {"query", "run read-only SQL against a recording", RunQuery},
      {"version", "print the gpuwhy version", RunVersion},
  };
  return kCommands;
}

}  // namespace gw
