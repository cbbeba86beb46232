// CPython code objects read from another process: file name, qualified name, and the line
// being executed at an instruction offset (decoding the version's line table).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"

namespace gw {

// Where a code object keeps what symbolization needs, for one interpreter version. Filled by
// the stacks source (src/sources/stacks/python_offsets.cc) from its verified tables or from
// _Py_DebugOffsets.
struct PythonCodeLayout {
  int minor = 0;                     // 10 for 3.10, …
  uint16_t code_filename = 0;        // co_filename (str)
  uint16_t code_name = 0;            // co_name (str)
  uint16_t code_qualname = 0;        // co_qualname (str, 3.11+); 0 = absent
  uint16_t code_firstlineno = 0;     // co_firstlineno (int)
  uint16_t code_linetable = 0;       // co_linetable (bytes): 3.10 PEP 626 table, 3.11+ locations
  uint16_t code_adaptive = 0;        // co_code_adaptive (3.11+): instruction pointers are relative
                                     // to code + code_adaptive; 0 = absent (3.10)
  bool instr_is_index = false;       // 3.10: the frame records f_lasti, an index in code units
  uint16_t bytes_size = 16;          // PyBytesObject.ob_size
  uint16_t bytes_sval = 32;          // PyBytesObject.ob_sval
  uint16_t unicode_length = 16;      // PyASCIIObject.length
  uint16_t unicode_state = 32;       // PyASCIIObject.state
  uint16_t unicode_ascii_size = 48;  // sizeof(PyASCIIObject): data of compact ASCII strings
  uint16_t unicode_compact_size = 72;  // sizeof(PyCompactUnicodeObject): other compact strings
};

// Reads another process's memory (process_vm_readv).
class ProcessMemory {
 public:
  explicit ProcessMemory(int32_t pid) : pid_(pid) {}
  bool Read(uint64_t address, void* out, size_t size) const;
  std::optional<uint64_t> ReadU64(uint64_t address) const;
  int32_t pid() const { return pid_; }

 private:
  int32_t pid_;
};

struct PythonCode {
  std::string filename;
  std::string name;  // co_qualname where present, else co_name
  int first_line = 0;
  std::string linetable;  // raw co_linetable bytes
};

// Reads a code object at `address`. Fails when the memory is gone or is not a code object.
StatusOr<PythonCode> ReadPythonCode(const ProcessMemory& memory, const PythonCodeLayout& layout,
                                    uint64_t address);
// Reads a str object as UTF-8 (compact strings only, which is every identifier and file name).
StatusOr<std::string> ReadPythonString(const ProcessMemory& memory, const PythonCodeLayout& layout,
                                       uint64_t address);

// The byte offset of the executing instruction, from the frame's raw instruction value
// (f_lasti for 3.10, a pointer for 3.11+). Negative for a frame that has not started.
int64_t PythonInstructionOffset(const PythonCodeLayout& layout, uint64_t code_address,
                                uint64_t instr);

// The line executing at byte offset `offset`; -1 when the table says "no line", the first
// line for offsets before the first instruction.
int PythonLineForOffset(int minor, const std::string& linetable, int first_line, int64_t offset);

}  // namespace gw
