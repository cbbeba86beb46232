// Turns captured stacks (native return addresses + CPython frame references) into readable
// frames, innermost first: native frames as `function+0xoff` with file:line from DWARF where
// present (else `module+0xoffset`, never dropped), Python frames as `file:line in function`
// with the executing line, spliced where the interpreter's eval loop sits in the native stack.
//
// Caches: per process, /proc/<pid>/maps snapshots taken at first sight and again when an
// address falls outside every snapshot (a library loaded later); they outlive the process. Per
// file, the parsed ELF/DWARF. Per (pid, code object), the decoded code object.
// One thread at a time (libdw handles are not thread-safe).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "elf/elf_file.h"
#include "symbolize/process_maps.h"
#include "symbolize/python_code.h"

namespace gw {

enum class FrameKind { kNative, kPython };

struct Frame {
  FrameKind kind = FrameKind::kNative;
  std::string function;          // "" when unresolved
  uint64_t function_offset = 0;  // native: address - function start
  std::string file;              // source file ("" when unknown)
  int line = 0;                  // 0 when unknown (-1 for a Python instruction without a line)
  std::string module;            // native: mapped file ("[anon]" when none)
  uint64_t offset = 0;           // native: ELF virtual address in `module` (for addr2line)
  uint64_t address = 0;          // native: the captured address in the process

  // "step (/x/train.py:12)", "gw_stack_target+0x8 (stack_target.c:9)", "libfoo.so+0x1234".
  std::string Display() const;
};

struct PythonFrameRef {
  uint64_t code = 0;   // code object address
  uint64_t instr = 0;  // raw instruction value (see PythonInstructionOffset)
  bool entry = false;  // outermost frame of one C-level eval call
};

struct RawStack {
  int32_t pid = 0;
  std::vector<uint64_t> native;        // innermost first; native[0] is the IP
  std::vector<PythonFrameRef> python;  // innermost first
};

// Splices Python frames into native frames (both innermost first): each native
// _PyEval_EvalFrameDefault frame is replaced by the Python frames it was running, up to and
// including the next entry frame (`python_entry`). When the native stack has no eval frame (an
// interpreter built without frame pointers stops the native walk before it), the Python frames
// go before the first native frame in `interpreter` or in a non-file mapping ("[stack]", where
// a broken frame-pointer chain lands), else at the bottom.
std::vector<Frame> SpliceFrames(const std::vector<Frame>& native, const std::vector<Frame>& python,
                                const std::vector<bool>& python_entry,
                                const std::string& interpreter);

class Symbolizer {
 public:
  // A process's maps are re-read for an address outside every snapshot only when its
  // executable mappings changed since the newest snapshot (VmLib in /proc/<pid>/status: a
  // library mapped since); otherwise the address is junk from a broken frame-pointer chain,
  // which many stacks hold, and reading the maps of a process with thousands of mappings
  // costs milliseconds.
  explicit Symbolizer(std::string proc_root = "/proc") : proc_root_(std::move(proc_root)) {}

  // Snapshots the process's maps now (call when a pid is first seen, before it can exit).
  Status SnapshotProcess(int32_t pid);
  // Enables Python frames for `pid`; `interpreter` is the file holding the eval loop
  // (libpython or the python executable) so its frames mark where Python frames splice.
  void SetPythonLayout(int32_t pid, const PythonCodeLayout& layout, const std::string& interpreter);
  // Drops every cache of the pid (maps snapshots, code objects).
  void ForgetProcess(int32_t pid);

  std::vector<Frame> Symbolize(const RawStack& stack);

  // JSON array of frames: [{"kind":"py","function":…,"file":…,"line":…}, {"kind":"native",
  // "function":…,"function_offset":…,"file":…,"line":…,"module":…,"offset":…}].
  static std::string ToJson(const std::vector<Frame>& frames);
  // Where the stack "is", for grouping: the innermost Python frame ("file:line"), else the
  // innermost native frame with a source line, else the innermost resolved native frame.
  static std::string Location(const std::vector<Frame>& frames);
  // How many times a process's maps were read (snapshots and refreshes), for the trace note.
  int64_t maps_reads() const { return maps_reads_; }

 private:
  struct ProcessState {
    std::vector<ProcessMaps> snapshots;  // newest first
    bool refreshed = false;              // maps re-read during the current Symbolize() call
    int64_t vm_lib_kb = -1;              // VmLib when the newest snapshot was read
    bool python = false;
    PythonCodeLayout layout;
    std::string interpreter;
    std::unordered_map<uint64_t, std::shared_ptr<PythonCode>> code_cache;  // nullptr: unreadable
  };
  Frame SymbolizeNative(ProcessState& process, int32_t pid, uint64_t address, bool is_return);
  Frame SymbolizePython(ProcessState& process, int32_t pid, const PythonFrameRef& ref);
  // What one address of one file resolved to: stacks share most of their frames, so each
  // address is looked up (symbol, DWARF line, demangling) once per file, not once per stack.
  struct NativeSymbol {
    std::string function;  // demangled; "" when no symbol covers the address
    uint64_t function_address = 0;
    std::string file;
    int line = 0;
  };
  struct FileState {
    std::unique_ptr<ElfFile> elf;                        // nullptr: could not open
    std::unordered_map<uint64_t, NativeSymbol> lookups;  // by lookup address
  };
  FileState& FileFor(const std::string& path);

  std::string proc_root_;
  int64_t maps_reads_ = 0;
  std::map<int32_t, ProcessState> processes_;
  std::map<std::string, FileState> files_;
};

}  // namespace gw
