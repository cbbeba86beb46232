#include "symbolize/symbolizer.h"

#include <cxxabi.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "base/proc_status.h"

namespace gw {

namespace {

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "_Z15gw_native_inneri" → "gw_native_inner(int)"; other names unchanged.
std::string Demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return name;
  std::string result(out);
  std::free(out);
  return result;
}

}  // namespace

std::string Frame::Display() const {
  std::string where;
  if (!file.empty() && line > 0) where = " (" + file + ":" + std::to_string(line) + ")";
  if (kind == FrameKind::kPython) {
    return (function.empty() ? "<python>" : function) + (where.empty() ? " (" + file + ")" : where);
  }
  if (function.empty()) return Basename(module) + "+" + Hex(offset) + where;
  return function + "+" + Hex(function_offset) + where;
}

Status Symbolizer::SnapshotProcess(int32_t pid) {
  ++maps_reads_;
  // Read before the maps: a library mapped in between shows as a change next time.
  int64_t vm_lib = ReadProcStatusKb(proc_root_, pid, "VmLib");
  ASSIGN_OR_RETURN(ProcessMaps maps, ProcessMaps::Read(pid, proc_root_));
  ProcessState& p = processes_[pid];
  p.vm_lib_kb = vm_lib;
  p.snapshots.insert(p.snapshots.begin(), std::move(maps));
  if (p.snapshots.size() > 8) p.snapshots.pop_back();
  return Status::Ok();
}

void Symbolizer::SetPythonLayout(int32_t pid, const PythonCodeLayout& layout,
                                 const std::string& interpreter) {
  ProcessState& p = processes_[pid];
  p.python = true;
  p.layout = layout;
  p.interpreter = interpreter;
  p.code_cache.clear();
}

void Symbolizer::ForgetProcess(int32_t pid) { processes_.erase(pid); }

Symbolizer::FileState& Symbolizer::FileFor(const std::string& path) {
  auto it = files_.find(path);
  if (it != files_.end()) return it->second;
  FileState& state = files_[path];
  if (StatusOr<std::unique_ptr<ElfFile>> file = ElfFile::Open(path); file.ok()) {
    state.elf = std::move(file).value();
  }
  return state;
}

Frame Symbolizer::SymbolizeNative(ProcessState& process, int32_t pid, uint64_t address,
                                  bool is_return) {
  Frame f;
  f.kind = FrameKind::kNative;
  f.address = address;
  const MappedRegion* region = nullptr;
  for (const ProcessMaps& maps : process.snapshots) {
    region = maps.Find(address);
    if (region != nullptr) break;
  }
  // An address outside every snapshot: maybe a library mapped since. Look at most once per
  // stack, never for junk that is not even a user-space address, and re-read the maps only
  // when the process's executable mappings changed since the newest snapshot.
  constexpr uint64_t kUserSpaceEnd = 0x0000800000000000ULL;
  if (region == nullptr && !process.refreshed && address < kUserSpaceEnd) {
    process.refreshed = true;
    if (ReadProcStatusKb(proc_root_, pid, "VmLib") != process.vm_lib_kb &&
        SnapshotProcess(pid).ok()) {
      region = process.snapshots.front().Find(address);
    }
  }
  if (region == nullptr || region->path.empty() || region->path[0] == '[') {
    f.module = region == nullptr || region->path.empty() ? "[anon]" : region->path;
    f.offset = address - (region ? region->start : 0);
    return f;
  }
  f.module = region->path;
  uint64_t file_offset = region->file_offset + (address - region->start);
  FileState& file = FileFor(region->path);
  if (file.elf == nullptr) {
    f.offset = file_offset;
    return f;
  }
  std::optional<uint64_t> vaddr = file.elf->FileOffsetToAddress(file_offset);
  f.offset = vaddr.value_or(file_offset);
  if (!vaddr) return f;
  // A return address points after the call; look up the call instruction itself.
  uint64_t lookup = is_return ? *vaddr - 1 : *vaddr;
  auto cached = file.lookups.find(lookup);
  if (cached == file.lookups.end()) {
    constexpr size_t kMaxLookupsPerFile = 1 << 18;  // a bound on the cache, not on correctness
    if (file.lookups.size() >= kMaxLookupsPerFile) file.lookups.clear();
    NativeSymbol symbol;
    if (const ElfFunction* fn = file.elf->FindFunction(lookup)) {
      symbol.function = Demangle(std::string(file.elf->FunctionName(*fn)));
      symbol.function_address = fn->address;
    }
    if (std::optional<SourceLine> line = file.elf->FindLine(lookup)) {
      symbol.file = std::move(line->file);
      symbol.line = line->line;
    }
    cached = file.lookups.emplace(lookup, std::move(symbol)).first;
  }
  const NativeSymbol& symbol = cached->second;
  if (!symbol.function.empty()) {
    f.function = symbol.function;
    f.function_offset = *vaddr - symbol.function_address;
  }
  f.file = symbol.file;
  f.line = symbol.line;
  return f;
}

Frame Symbolizer::SymbolizePython(ProcessState& process, int32_t pid, const PythonFrameRef& ref) {
  Frame f;
  f.kind = FrameKind::kPython;
  auto it = process.code_cache.find(ref.code);
  if (it == process.code_cache.end()) {
    StatusOr<PythonCode> code = ReadPythonCode(ProcessMemory(pid), process.layout, ref.code);
    std::shared_ptr<PythonCode> entry;
    if (code.ok()) entry = std::make_shared<PythonCode>(std::move(code).value());
    it = process.code_cache.emplace(ref.code, std::move(entry)).first;
  }
  if (!it->second) {
    f.function = "<python code " + Hex(ref.code) + ">";
    return f;
  }
  const PythonCode& code = *it->second;
  f.function = code.name;
  f.file = code.filename;
  int64_t offset = PythonInstructionOffset(process.layout, ref.code, ref.instr);
  f.line = PythonLineForOffset(process.layout.minor, code.linetable, code.first_line, offset);
  return f;
}

std::vector<Frame> Symbolizer::Symbolize(const RawStack& stack) {
  ProcessState& process = processes_[stack.pid];
  if (process.snapshots.empty()) (void)SnapshotProcess(stack.pid);
  process.refreshed = false;
  std::vector<Frame> native;
  native.reserve(stack.native.size());
  for (size_t i = 0; i < stack.native.size(); ++i) {
    native.push_back(SymbolizeNative(process, stack.pid, stack.native[i], i > 0));
  }
  std::vector<Frame> python;
  for (const PythonFrameRef& ref : stack.python) {
    python.push_back(SymbolizePython(process, stack.pid, ref));
  }
  if (python.empty()) return native;

  std::vector<bool> entries;
  for (const PythonFrameRef& ref : stack.python) entries.push_back(ref.entry);
  return SpliceFrames(native, python, entries, process.interpreter);
}

std::vector<Frame> SpliceFrames(const std::vector<Frame>& native, const std::vector<Frame>& python,
                                const std::vector<bool>& python_entry,
                                const std::string& interpreter) {
  constexpr const char* kEval = "_PyEval_EvalFrameDefault";
  std::vector<Frame> out;
  size_t next_py = 0;
  bool any_eval = false;
  for (const Frame& f : native) any_eval = any_eval || f.function == kEval;
  bool placed = false;
  for (const Frame& f : native) {
    if (any_eval && f.function == kEval && next_py < python.size()) {
      while (next_py < python.size()) {
        bool entry = next_py < python_entry.size() && python_entry[next_py];
        out.push_back(python[next_py++]);
        if (entry) break;
      }
      continue;
    }
    bool off_the_rails = !f.module.empty() && f.module[0] == '[';
    if (!any_eval && !placed &&
        ((!interpreter.empty() && f.module == interpreter) || off_the_rails)) {
      while (next_py < python.size()) out.push_back(python[next_py++]);
      placed = true;
    }
    out.push_back(f);
  }
  while (next_py < python.size()) out.push_back(python[next_py++]);
  return out;
}

std::string Symbolizer::ToJson(const std::vector<Frame>& frames) {
  nlohmann::json array = nlohmann::json::array();
  for (const Frame& f : frames) {
    nlohmann::json j;
    j["kind"] = f.kind == FrameKind::kPython ? "py" : "native";
    j["function"] = f.function;
    j["file"] = f.file;
    j["line"] = f.line;
    if (f.kind == FrameKind::kNative) {
      j["function_offset"] = f.function_offset;
      j["module"] = f.module;
      j["offset"] = f.offset;
    }
    array.push_back(std::move(j));
  }
  return array.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Symbolizer::Location(const std::vector<Frame>& frames) {
  for (const Frame& f : frames) {
    if (f.kind == FrameKind::kPython && !f.file.empty()) {
      return f.file + ":" + std::to_string(f.line);
    }
  }
  for (const Frame& f : frames) {
    if (!f.file.empty() && f.line > 0) return f.file + ":" + std::to_string(f.line);
  }
  for (const Frame& f : frames) {
    if (!f.function.empty()) return f.function;
  }
  return frames.empty() ? "" : frames.front().Display();
}

}  // namespace gw
