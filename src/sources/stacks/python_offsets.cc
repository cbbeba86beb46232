#include "sources/stacks/python_offsets.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <regex>
#include <set>

#include "elf/elf_file.h"
#include "symbolize/process_maps.h"

namespace gw {

namespace {

// One row of the frozen table: every value printed by tools/py_offsets_probe.c.
struct OffsetRow {
  int minor;
  uint16_t interpreters_head, interp_next, threads_head, tstate_next, tstate_thread_id;
  uint16_t tstate_frame, cframe_current_frame;
  uint16_t frame_code, frame_previous, frame_instr, frame_entry;
  uint8_t entry_mode, instr_is_index;
  uint16_t co_filename, co_name, co_qualname, co_firstlineno, co_linetable, co_code_adaptive;
  uint16_t ascii_size, compact_size;
  uint8_t gil_mode;
  uint16_t gil_offset, gil_last_holder, gil_locked;
};

constexpr uint16_t kNone = GW_PY_OFFSET_NONE;

// Verified 2026-11-29 with tools/py_offsets_probe.sh against pyenv 3.10.13, 3.11.7, 3.12.1,
// 3.13.0 (x86-64, default build: no free threading, no Py_DEBUG); the GIL columns 2026-12-06.
constexpr OffsetRow kTable[] = {
    // 3.10: tstate->frame is a PyFrameObject; f_lasti is an int index in code units.
    {10, 32,  0,   8, 8,  176, 24, kNone, 32, 24, 96, kNone, GW_PY_ENTRY_EVERY_FRAME,
     1,  104, 112, 0, 40, 120, 0,  48,    72, GW_PY_GIL_IN_RUNTIME, 352, 8, 16},
    // 3.11: tstate->cframe->current_frame; is_entry marks the eval call's first frame.
    {11, 40,  0,   16,  8,  152, 56,  8,  32, 48, 56, 68, GW_PY_ENTRY_IS_ENTRY,
     0,  112, 120, 128, 72, 136, 184, 48, 72, GW_PY_GIL_IN_RUNTIME, 360, 8, 16},
    // 3.12: still through cframe (current_frame at 0); owner == CSTACK marks shim frames.
    {12, 40,  0,   72,  8,  136, 56,  0,  0, 8, 56, 70, GW_PY_ENTRY_CSTACK_OWNER,
     0,  112, 120, 128, 68, 136, 192, 40, 56, GW_PY_GIL_INTERP_PTR, 384, 8, 16},
    // 3.13: tstate->current_frame; f_executable + instr_ptr.
    {13, 632, 7264, 7344, 8,  152, 72,  kNone, 0, 8, 56, 70, GW_PY_ENTRY_CSTACK_OWNER,
     0,  112, 120,  128,  68, 136, 200, 40,    56, GW_PY_GIL_INTERP_PTR, 16, 8, 16},
};

uint16_t ReadSize(const gw_py_offsets& o) {
  uint16_t end = 0;
  auto grow = [&](uint16_t off, uint16_t size) {
    if (off != kNone && off + size > end) end = static_cast<uint16_t>(off + size);
  };
  grow(o.frame_code, 8);
  grow(o.frame_previous, 8);
  grow(o.frame_instr, o.instr_is_index ? 4 : 8);
  grow(o.frame_entry, 1);
  return end;
}

PythonOffsets FromRow(const OffsetRow& r) {
  PythonOffsets out;
  out.minor = r.minor;
  gw_py_offsets& b = out.bpf;
  b.version = 300 + static_cast<uint32_t>(r.minor);
  b.runtime_interpreters_head = r.interpreters_head;
  b.interp_next = r.interp_next;
  b.interp_threads_head = r.threads_head;
  b.tstate_next = r.tstate_next;
  b.tstate_thread_id = r.tstate_thread_id;
  b.tstate_frame = r.tstate_frame;
  b.cframe_current_frame = r.cframe_current_frame;
  b.frame_code = r.frame_code;
  b.frame_previous = r.frame_previous;
  b.frame_instr = r.frame_instr;
  b.frame_entry = r.frame_entry;
  b.entry_mode = r.entry_mode;
  b.instr_is_index = r.instr_is_index;
  b.frame_read_size = ReadSize(b);
  b.gil_mode = r.gil_mode;
  b.gil_offset = r.gil_offset;
  b.gil_last_holder = r.gil_last_holder;
  b.gil_locked = r.gil_locked;
  PythonCodeLayout& c = out.code;
  c.minor = r.minor;
  c.code_filename = r.co_filename;
  c.code_name = r.co_name;
  c.code_qualname = r.co_qualname;
  c.code_firstlineno = r.co_firstlineno;
  c.code_linetable = r.co_linetable;
  c.code_adaptive = r.co_code_adaptive;
  c.instr_is_index = r.instr_is_index != 0;
  c.unicode_ascii_size = r.ascii_size;
  c.unicode_compact_size = r.compact_size;
  out.source = "table 3." + std::to_string(r.minor);
  return out;
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

StatusOr<PythonOffsets> PythonOffsetsForVersion(int minor) {
  for (const OffsetRow& r : kTable) {
    if (r.minor == minor) return FromRow(r);
  }
  return NotFound("no CPython offsets for 3." + std::to_string(minor) +
                  " — hint: supported are 3.10–3.13 (src/sources/stacks/README.md says how to "
                  "add a version)");
}

StatusOr<PythonOffsets> PythonOffsetsFromDebugOffsets(const std::string& block) {
  // The 3.13 layout: char cookie[8]; then uint64_t fields in declaration order
  // (Include/internal/pycore_runtime.h). Index i is the i-th uint64_t after the cookie.
  if (block.size() < 8 + 8 * 2 || block.compare(0, 8, "xdebugpy") != 0) {
    return NotFound("_PyRuntime does not start with _Py_DebugOffsets (cookie \"xdebugpy\")");
  }
  auto field = [&](int i) {
    uint64_t v = 0;
    std::memcpy(&v, block.data() + 8 + 8 * i, sizeof v);
    return v;
  };
  uint64_t version = field(0);  // PY_VERSION_HEX
  int major = static_cast<int>((version >> 24) & 0xff);
  int minor = static_cast<int>((version >> 16) & 0xff);
  if (major != 3 || minor != 13) {
    return NotFound("_Py_DebugOffsets of CPython " + std::to_string(major) + "." +
                    std::to_string(minor) + ": layout not known to this build");
  }
  if (field(1) != 0) {
    return FailedPrecondition("free-threaded CPython 3.13t is not supported by the frame walker");
  }
  // Indices into the 3.13 struct (after cookie): 0 version, 1 free_threaded,
  // runtime_state 2..4, interpreter_state 5..17, thread_state 18..26, interpreter_frame
  // 27..32, code_object 33..42, pyobject 43..44, type_object 45..48, tuple 49..51,
  // list 52..54, dict 55..57, float 58..59, long 60..62, bytes 63..65, unicode 66..69.
  if (block.size() < 8 + 8 * 70) return DataLoss("_Py_DebugOffsets block too short");
  ASSIGN_OR_RETURN(PythonOffsets out, PythonOffsetsForVersion(13));
  auto u16 = [&](int i) -> StatusOr<uint16_t> {
    uint64_t v = field(i);
    if (v >= kNone) return DataLoss("_Py_DebugOffsets field " + std::to_string(i) + " too large");
    return static_cast<uint16_t>(v);
  };
  gw_py_offsets& b = out.bpf;
  ASSIGN_OR_RETURN(b.runtime_interpreters_head, u16(4));
  ASSIGN_OR_RETURN(b.interp_next, u16(7));
  ASSIGN_OR_RETURN(b.interp_threads_head, u16(8));
  ASSIGN_OR_RETURN(b.tstate_next, u16(20));
  ASSIGN_OR_RETURN(b.tstate_frame, u16(22));
  ASSIGN_OR_RETURN(b.tstate_thread_id, u16(23));
  ASSIGN_OR_RETURN(b.frame_previous, u16(28));
  ASSIGN_OR_RETURN(b.frame_code, u16(29));
  ASSIGN_OR_RETURN(b.frame_instr, u16(30));
  ASSIGN_OR_RETURN(b.frame_entry, u16(32));
  // The GIL: interpreter_state.ceval_gil (13) is the pointer; the lock's fields are given as
  // offsets of the interpreter's own _gil (14 its start, 16 locked, 17 last_holder).
  ASSIGN_OR_RETURN(b.gil_offset, u16(13));
  ASSIGN_OR_RETURN(uint16_t gil_start, u16(14));
  ASSIGN_OR_RETURN(uint16_t gil_locked, u16(16));
  ASSIGN_OR_RETURN(uint16_t gil_holder, u16(17));
  if (gil_locked >= gil_start && gil_holder >= gil_start) {
    b.gil_mode = GW_PY_GIL_INTERP_PTR;
    b.gil_locked = static_cast<uint16_t>(gil_locked - gil_start);
    b.gil_last_holder = static_cast<uint16_t>(gil_holder - gil_start);
  } else {
    b.gil_mode = GW_PY_GIL_UNKNOWN;
  }
  b.frame_read_size = ReadSize(b);
  if (b.frame_read_size > GW_PY_FRAME_READ_MAX) {
    return DataLoss("_Py_DebugOffsets: interpreter frame fields beyond 128 bytes");
  }
  PythonCodeLayout& c = out.code;
  ASSIGN_OR_RETURN(c.code_filename, u16(34));
  ASSIGN_OR_RETURN(c.code_name, u16(35));
  ASSIGN_OR_RETURN(c.code_qualname, u16(36));
  ASSIGN_OR_RETURN(c.code_linetable, u16(37));
  ASSIGN_OR_RETURN(c.code_firstlineno, u16(38));
  ASSIGN_OR_RETURN(c.code_adaptive, u16(42));
  ASSIGN_OR_RETURN(c.bytes_size, u16(64));
  ASSIGN_OR_RETURN(c.bytes_sval, u16(65));
  ASSIGN_OR_RETURN(c.unicode_state, u16(67));
  ASSIGN_OR_RETURN(c.unicode_length, u16(68));
  ASSIGN_OR_RETURN(c.unicode_ascii_size, u16(69));
  out.source = "_Py_DebugOffsets " + std::to_string(major) + "." + std::to_string(minor) + "." +
               std::to_string((version >> 8) & 0xff);
  return out;
}

StatusOr<PythonProcess> DiscoverPythonProcess(int32_t pid, const std::string& proc_root) {
  ASSIGN_OR_RETURN(ProcessMaps maps, ProcessMaps::Read(pid, proc_root));
  static const std::regex kPythonName(R"((?:^|lib)python3\.([0-9]+))");
  // Candidates: libpython first (a shared build keeps _PyRuntime there), then the executable.
  std::vector<std::string> candidates;
  std::set<std::string> seen;
  std::string exe;
  {
    char buf[PATH_MAX];
    std::string link = proc_root + "/" + std::to_string(pid) + "/exe";
    ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
    if (n > 0) exe.assign(buf, static_cast<size_t>(n));
  }
  for (const MappedRegion& r : maps.regions()) {
    if (r.path.empty() || r.path[0] == '[' || seen.count(r.path)) continue;
    seen.insert(r.path);
    if (Basename(r.path).rfind("libpython3.", 0) == 0) candidates.push_back(r.path);
  }
  if (!exe.empty()) candidates.push_back(exe);

  for (const std::string& path : candidates) {
    StatusOr<std::unique_ptr<ElfFile>> elf = ElfFile::Open(path);
    if (!elf.ok()) continue;
    std::optional<uint64_t> runtime = (*elf)->SymbolAddress("_PyRuntime");
    if (!runtime) continue;
    PythonProcess p;
    p.pid = pid;
    p.interpreter = path;
    std::smatch m;
    std::string base = Basename(path);
    if (std::regex_search(base, m, kPythonName)) p.minor = std::stoi(m[1].str());
    // Py_Version (3.11+): the exact PY_VERSION_HEX, from the file's initialized data.
    if (std::optional<uint64_t> v = (*elf)->SymbolAddress("Py_Version")) {
      if (std::optional<std::string> bytes = (*elf)->ReadAddress(*v, 4)) {
        uint32_t hex = 0;
        std::memcpy(&hex, bytes->data(), 4);
        if ((hex >> 24) == 3) {
          p.minor = static_cast<int>((hex >> 16) & 0xff);
          p.version = "3." + std::to_string(p.minor) + "." + std::to_string((hex >> 8) & 0xff);
        }
      }
    }
    if (p.minor == 0) {
      return NotFound("pid " + std::to_string(pid) + ": " + path +
                      " defines _PyRuntime but its CPython version is unknown");
    }
    if (p.version.empty()) p.version = "3." + std::to_string(p.minor);
    std::optional<uint64_t> file_offset = (*elf)->AddressToFileOffset(*runtime);
    std::optional<uint64_t> address =
        file_offset ? maps.AddressOfFileOffset(path, *file_offset) : std::nullopt;
    if (!address) {
      return NotFound("pid " + std::to_string(pid) + ": _PyRuntime of " + path + " is not mapped");
    }
    p.runtime_address = *address;
    if (p.minor >= 13) {
      std::string block(kDebugOffsetsReadSize, '\0');
      if (!ProcessMemory(pid).Read(*address, block.data(), block.size())) {
        return PermissionDenied("pid " + std::to_string(pid) +
                                ": read _Py_DebugOffsets: process_vm_readv failed — hint: run as "
                                "root (CAP_SYS_PTRACE)");
      }
      ASSIGN_OR_RETURN(p.offsets, PythonOffsetsFromDebugOffsets(block));
    } else {
      ASSIGN_OR_RETURN(p.offsets, PythonOffsetsForVersion(p.minor));
    }
    p.offsets.bpf.runtime_addr = *address;
    return p;
  }
  return NotFound("pid " + std::to_string(pid) + " is not a CPython process (no _PyRuntime)");
}

std::vector<std::string> DescribePythonProcesses(const std::string& proc_root) {
  std::vector<std::string> lines;
  DIR* dir = opendir(proc_root.c_str());
  if (dir == nullptr) return lines;
  std::vector<int32_t> pids;
  while (struct dirent* e = readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && pid > 0) pids.push_back(static_cast<int32_t>(pid));
  }
  closedir(dir);
  std::sort(pids.begin(), pids.end());
  for (int32_t pid : pids) {
    char buf[PATH_MAX];
    std::string link = proc_root + "/" + std::to_string(pid) + "/exe";
    ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
    if (n <= 0) continue;
    std::string exe = Basename(std::string(buf, static_cast<size_t>(n)));
    if (exe.rfind("python", 0) != 0) continue;
    std::string head = "pid " + std::to_string(pid) + " " + exe + ": ";
    StatusOr<PythonProcess> p = DiscoverPythonProcess(pid, proc_root);
    if (p.ok()) {
      lines.push_back(head + "Python frames walkable (CPython " + p->version + ", " +
                      p->offsets.source + ")");
    } else {
      lines.push_back(head + "Python frames not walkable: " + p.status().message());
    }
  }
  return lines;
}

}  // namespace gw
