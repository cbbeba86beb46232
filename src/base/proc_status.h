// One number from /proc/<pid>/status: what tells, without reading a process's maps, whether
// its mappings changed (VmLib, the size of its executable library mappings, moves at every
// exec, dlopen and dlclose).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gw {

// The value of a "Field:   N kB" line (e.g. "VmLib"), in kB; -1 when the file or the line is
// missing (the process is gone, or it is a kernel thread).
int64_t ReadProcStatusKb(const std::string& proc_root, int32_t pid, std::string_view field);

}  // namespace gw
