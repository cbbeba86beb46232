// Loads the selftest BPF program, attaches it, triggers it and reads its counter back.
#pragma once

#include "base/status.h"

namespace gw {

// Returns OK when a BPF program loaded, attached to a tracepoint and counted our syscalls.
// Errors carry the libbpf step that failed and a hint (privileges, kernel config).
Status RunBpfSelfTest();

}  // namespace gw
