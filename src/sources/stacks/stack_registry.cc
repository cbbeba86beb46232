#include "sources/stacks/stack_registry.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>

namespace gw {

namespace {

StatusOr<ScopedFd> CreateMap(bpf_map_type type, const char* name, uint32_t key_size,
                             uint32_t value_size, uint32_t max_entries, uint32_t flags) {
  LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = flags);
  int fd = bpf_map_create(type, name, key_size, value_size, max_entries, &opts);
  if (fd < 0) {
    int err = errno;
    std::string hint = err == EPERM || err == EACCES
                           ? " — hint: run as root or grant CAP_BPF and CAP_PERFMON"
                           : "";
    return Status(err == EPERM || err == EACCES ? StatusCode::kPermissionDenied
                                                : StatusCode::kFailedPrecondition,
                  std::string("create BPF map ") + name + ": " + std::strerror(err) + hint);
  }
  return ScopedFd(fd);
}

}  // namespace

StatusOr<std::unique_ptr<StackRegistry>> StackRegistry::Create(
    const StackRegistryOptions& options) {
  std::unique_ptr<StackRegistry> r(new StackRegistry(options));
  // Definitions must match stacks.bpf.h: bpf_map__reuse_fd adopts these, and the programs'
  // accesses are verified against the value sizes.
  ASSIGN_OR_RETURN(r->stacks_fd_,
                   CreateMap(BPF_MAP_TYPE_HASH, "gw_stacks", sizeof(uint64_t), sizeof(gw_stack),
                             options.max_stacks, BPF_F_NO_PREALLOC));
  ASSIGN_OR_RETURN(r->python_fd_, CreateMap(BPF_MAP_TYPE_HASH, "gw_py_procs", sizeof(uint32_t),
                                            sizeof(gw_py_offsets), 4096, 0));
  ASSIGN_OR_RETURN(r->tstate_fd_, CreateMap(BPF_MAP_TYPE_LRU_HASH, "gw_py_tstate", sizeof(uint32_t),
                                            sizeof(uint64_t), 16384, 0));
  ASSIGN_OR_RETURN(r->stats_fd_, CreateMap(BPF_MAP_TYPE_PERCPU_ARRAY, "gw_stack_stats",
                                           sizeof(uint32_t), sizeof(uint64_t), GW_STAT_COUNT, 0));
  return r;
}

Status StackRegistry::ShareMaps(bpf_object* object) const {
  const std::pair<const char*, int> maps[] = {{"gw_stacks", stacks_fd_.get()},
                                              {"gw_py_procs", python_fd_.get()},
                                              {"gw_py_tstate", tstate_fd_.get()},
                                              {"gw_stack_stats", stats_fd_.get()}};
  for (const auto& [name, fd] : maps) {
    bpf_map* map = bpf_object__find_map_by_name(object, name);
    if (map == nullptr) {
      return NotFound(std::string("BPF object ") + bpf_object__name(object) + " has no map " +
                      name + " — hint: include sources/stacks/stacks.bpf.h in its program");
    }
    if (int err = bpf_map__reuse_fd(map, fd); err != 0) {
      return Status(StatusCode::kFailedPrecondition, std::string("share stack map ") + name +
                                                         " with " + bpf_object__name(object) +
                                                         ": " + std::strerror(-err));
    }
  }
  return Status::Ok();
}

StatusOr<WatchResult> StackRegistry::Watch(int32_t pid) {
  RETURN_IF_ERROR(symbolizer_.SnapshotProcess(pid).WithContext("watch pid " + std::to_string(pid)));
  WatchResult result;
  StatusOr<PythonProcess> python = DiscoverPythonProcess(pid, options_.proc_root);
  if (!python.ok()) {
    if (python.status().code() != StatusCode::kNotFound ||
        python.status().message().find("not a CPython") == std::string::npos) {
      result.note = python.status().message();
    }
    return result;
  }
  uint32_t key = static_cast<uint32_t>(pid);
  if (bpf_map_update_elem(python_fd_.get(), &key, &python->offsets.bpf, BPF_ANY) != 0) {
    result.note =
        ErrnoStatus("enable Python frames for pid " + std::to_string(pid), errno).message();
    return result;
  }
  symbolizer_.SetPythonLayout(pid, python->offsets.code, python->interpreter);
  result.python = true;
  result.python_version = python->version;
  result.offsets_source = python->offsets.source;
  return result;
}

void StackRegistry::Unwatch(int32_t pid) {
  uint32_t key = static_cast<uint32_t>(pid);
  (void)bpf_map_delete_elem(python_fd_.get(), &key);
}

std::vector<SymbolizedStack> StackRegistry::Drain() {
  std::vector<uint64_t> keys;
  uint64_t key = 0;
  uint64_t next = 0;
  const void* prev = nullptr;
  while (bpf_map_get_next_key(stacks_fd_.get(), prev, &next) == 0) {
    keys.push_back(next);
    key = next;
    prev = &key;
  }
  std::vector<SymbolizedStack> out;
  for (uint64_t k : keys) {
    gw_stack raw{};
    if (bpf_map_lookup_and_delete_elem(stacks_fd_.get(), &k, &raw) != 0) continue;
    if (!emitted_.insert(k).second) continue;  // symbolized in an earlier drain
    RawStack stack;
    stack.pid = static_cast<int32_t>(raw.tgid);
    uint32_t native =
        raw.native_count > GW_STACK_MAX_NATIVE ? GW_STACK_MAX_NATIVE : raw.native_count;
    uint32_t first = (raw.flags & GW_STACK_NATIVE_SKIP_FIRST) && native > 0 ? 1 : 0;
    stack.native.assign(raw.native + first, raw.native + native);
    uint32_t py = raw.py_count > GW_STACK_MAX_PY ? GW_STACK_MAX_PY : raw.py_count;
    for (uint32_t i = 0; i < py; ++i) {
      stack.python.push_back(
          {raw.py[i].code, raw.py[i].instr, ((raw.py_entry_mask >> i) & 1) != 0});
    }
    SymbolizedStack s;
    s.id = static_cast<int64_t>(k);
    s.pid = stack.pid;
    s.flags = raw.flags;
    s.frames = symbolizer_.Symbolize(stack);
    s.frames_json = Symbolizer::ToJson(s.frames);
    s.location = Symbolizer::Location(s.frames);
    s.raw = std::move(stack);
    out.push_back(std::move(s));
  }
  return out;
}

StackStats StackRegistry::Stats() const {
  int cpus = libbpf_num_possible_cpus();
  std::vector<uint64_t> values(cpus > 0 ? static_cast<size_t>(cpus) : 1);
  int64_t sums[GW_STAT_COUNT] = {};
  for (uint32_t i = 0; i < GW_STAT_COUNT; ++i) {
    if (bpf_map_lookup_elem(stats_fd_.get(), &i, values.data()) != 0) continue;
    for (uint64_t v : values) sums[i] += static_cast<int64_t>(v);
  }
  StackStats s;
  s.captures = sums[GW_STAT_CAPTURES];
  s.new_stacks = sums[GW_STAT_NEW_STACKS];
  s.map_full = sums[GW_STAT_MAP_FULL];
  s.native_errors = sums[GW_STAT_NATIVE_ERROR];
  s.python_no_thread = sums[GW_STAT_PY_NO_THREAD];
  s.python_truncated = sums[GW_STAT_PY_TRUNCATED];
  s.python_read_errors = sums[GW_STAT_PY_READ_ERROR];
  s.busy = sums[GW_STAT_BUSY];
  s.tstate_cached = sums[GW_STAT_TSTATE_CACHED];
  s.over_budget = sums[GW_STAT_OVER_BUDGET];
  return s;
}

}  // namespace gw
