#include "sources/host/host_source.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <climits>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <vector>

#include "discover/cuda_libs.h"
#include "host.skel.h"
#include "sources/host/host_abi.h"
#include "sources/stacks/stack_registry.h"
#include "sources/system/host_info.h"

namespace gw {

static_assert(sizeof(gw_host_record) == 96, "gw_host_record layout changed: update both sides");

namespace {

int64_t MonoNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// libbpf's own messages: warnings are kept (bounded) so a failed load can say why.
std::mutex g_libbpf_log_mu;
std::string g_libbpf_log;

int LibbpfPrint(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  // A verifier log comes as one message of many kilobytes; its reason is at the end.
  static thread_local std::vector<char> line(1 << 16);
  int n = std::vsnprintf(line.data(), line.size(), format, args);
  if (n < 0) return n;
  size_t len = std::min(static_cast<size_t>(n), line.size() - 1);
  std::lock_guard<std::mutex> lock(g_libbpf_log_mu);
  g_libbpf_log.append(line.data(), len);
  if (g_libbpf_log.size() > 8192) g_libbpf_log.erase(0, g_libbpf_log.size() - 8192);
  return n;
}

std::string TakeLibbpfLogTail() {
  std::lock_guard<std::mutex> lock(g_libbpf_log_mu);
  std::string tail = g_libbpf_log.size() > 6000 ? g_libbpf_log.substr(g_libbpf_log.size() - 6000)
                                               : g_libbpf_log;
  g_libbpf_log.clear();
  return tail;
}

constexpr const char* kPrivilegeHint =
    " — hint: run as root (sudo) or grant CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN";

Status BpfError(const std::string& what, int err) {
  err = err < 0 ? -err : err;
  std::string log = TakeLibbpfLogTail();
  // As root, EACCES is the verifier refusing a program: its log says why.
  if ((err == EPERM || err == EACCES) && (geteuid() != 0 || log.empty())) {
    return PermissionDenied(what + ": " + std::strerror(err) + kPrivilegeHint);
  }
  std::string msg = what + ": " + std::strerror(err);
  if (!log.empty()) msg += " (libbpf: " + log + ")";
  return FailedPrecondition(msg);
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\0')) s.pop_back();
  return s;
}

std::vector<std::string> SplitCmdline(const std::string& raw) {
  std::vector<std::string> argv;
  std::string cur;
  for (char c : raw) {
    if (c == '\0') {
      argv.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) argv.push_back(cur);
  return argv;
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// ppid from /proc/<pid>/stat (the field after the parenthesised comm).
int32_t ReadPpid(const std::string& proc_root, int32_t pid) {
  std::string stat = ReadSmallFile(proc_root + "/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  char state = 0;
  int ppid = 0;
  if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) != 2) return 0;
  return ppid;
}

// When the process started, in CLOCK_MONOTONIC ns (/proc/PID/stat field 22 counts clock ticks
// of CLOCK_BOOTTIME); 0 when unknown.
int64_t ReadStartMonoNs(const std::string& proc_root, int32_t pid) {
  std::string stat = ReadSmallFile(proc_root + "/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i < 22) continue;
    long ticks_per_s = sysconf(_SC_CLK_TCK);
    unsigned long long ticks = std::strtoull(field.c_str(), nullptr, 10);
    if (ticks_per_s <= 0 || ticks == 0) return 0;
    timespec boot{}, mono{};
    clock_gettime(CLOCK_BOOTTIME, &boot);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    int64_t suspended = (boot.tv_sec - mono.tv_sec) * 1'000'000'000LL + (boot.tv_nsec - mono.tv_nsec);
    int64_t start_boot = static_cast<int64_t>(ticks) * (1'000'000'000LL / ticks_per_s);
    return start_boot - suspended;
  }
  return 0;
}

}  // namespace

std::string ProcessDisplayName(const std::string& comm, const std::vector<std::string>& argv) {
  if (argv.empty()) return comm;
  // Only interpreters get their script appended; a process that renamed itself
  // (pt_data_worker:0) keeps its own name.
  static const char* kInterpreters[] = {"python", "node", "ruby", "perl", "bash", "sh", "java"};
  bool interpreter = false;
  for (const char* name : kInterpreters) {
    if (comm.rfind(name, 0) == 0) interpreter = true;
  }
  if (!interpreter) return comm;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "-m" && i + 1 < argv.size()) return comm + " (-m " + argv[i + 1] + ")";
    if (a == "-c") return comm + " (-c)";
    if (a.empty() || a[0] == '-') continue;
    // Other interpreters take non-script arguments too (`bash 3`): only a path names a script.
    if (comm.rfind("python", 0) != 0 && a.find('/') == std::string::npos &&
        a.find('.') == std::string::npos) {
      return comm;
    }
    return comm + " (" + Basename(a) + ")";
  }
  return comm;
}

void HostSource::DestroySkel(host_bpf* skel) { host_bpf__destroy(skel); }
void HostSource::FreeRing(ring_buffer* rb) { ring_buffer__free(rb); }
void HostSource::DestroyLink(bpf_link* link) { bpf_link__destroy(link); }

HostSource::HostSource(HostOptions options) : options_(std::move(options)) {}

// One CPU-clock event per online CPU, counting every task on that CPU (pid -1), sampling `hz`
// times a second of the CPU's time; the program keeps the tracked threads' samples. A CPU that
// is offline (or not allowed) is skipped; none at all is an error.
Status HostSource::AttachProfile(uint32_t hz) {
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return BpfError("count CPUs for the on-CPU profile", -cpus);
  int attached = 0;
  int last_err = 0;
  for (int cpu = 0; cpu < cpus; ++cpu) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.freq = 1;
    attr.sample_freq = hz;
    int fd = static_cast<int>(
        syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      last_err = errno;
      continue;  // offline CPU (ENODEV) and the like
    }
    bpf_link* link = bpf_program__attach_perf_event(skel_.get()->progs.gw_cpu_sample, fd);
    if (!link) {
      last_err = errno;
      close(fd);
      continue;
    }
    links_.emplace_back(link);  // the link owns the perf event's fd
    ++attached;
  }
  if (attached == 0) {
    return BpfError("attach the on-CPU profile (perf_event_open, CPU clock) — hint: "
                    "`--profile-hz 0` traces without it",
                    last_err);
  }
  profile_cpus_ = attached;
  return Status::Ok();
}

HostSource::~HostSource() {
  // Links first (detach), then the ring buffer, then the maps and programs.
  links_.clear();
  ring_.Reset();
  skel_.Reset();
}

StatusOr<std::unique_ptr<HostSource>> HostSource::Create(HostOptions options) {
  int64_t ring = options.ring_bytes;
  if (ring < 4096 || (ring & (ring - 1)) != 0) {
    return InvalidArgument("host ring buffer size " + std::to_string(ring) +
                           " must be a power of two ≥ 4096");
  }
  return std::unique_ptr<HostSource>(new HostSource(std::move(options)));
}

Status HostSource::Start(const SourceContext& context) {
  if (started_) return FailedPrecondition("host source started twice");
  context_ = context;
  libbpf_set_print(LibbpfPrint);
  skel_.Reset(host_bpf__open());
  if (!skel_) return BpfError("open host BPF object", errno);
  host_bpf* skel = skel_.get();
  skel->rodata->fault_io_window_ns = static_cast<__u64>(options_.fault_io_window_ns);
  skel->rodata->competitor_min_runq_ns = static_cast<__u64>(options_.competitor_min_runq_ns);
  skel->rodata->read_threshold_ns = static_cast<__u64>(options_.read_threshold_ns);
  skel->rodata->self_tgid = static_cast<__u32>(getpid());
  if (context.stack_registry != nullptr) {
    if (context.stacks) {
      skel->rodata->capture_stacks = 1;
      skel->rodata->stack_sample_ns = context.stack_interval_ns();  // one off-CPU stack each
    }
    skel->rodata->detect_gil = 1;  // reads the Python offsets the registry keeps
    RETURN_IF_ERROR(context.stack_registry->ShareMaps(skel->obj));
  }
  const bool profile = context.profile_hz > 0 && context.stack_registry != nullptr;
  bpf_program__set_autoload(skel->progs.gw_cpu_sample, profile);
  if (int err = bpf_map__set_max_entries(skel->maps.events,
                                         static_cast<__u32>(options_.ring_bytes));
      err != 0) {
    return BpfError("size host ring buffer", err);
  }
  // Tracepoints this kernel lacks (mark_victim without CONFIG_MEMCG era kernels, exceptions
  // on non-x86) are skipped with a note; sched_switch is required.
  // vmlinux BTF is parsed once here (libbpf_find_vmlinux_btf_id would parse it per call).
  ScopedResource<btf*, btf__free, nullptr> vmlinux_btf(btf__load_vmlinux_btf());
  btf* vmlinux = vmlinux_btf.get();
  if (!vmlinux) {
    return FailedPrecondition("read kernel BTF (/sys/kernel/btf/vmlinux): " +
                              std::string(std::strerror(errno)) +
                              " — hint: gpuwhy needs a kernel with CONFIG_DEBUG_INFO_BTF");
  }
  bpf_program* prog = nullptr;
  bpf_object__for_each_program(prog, skel->obj) {
    if (!bpf_program__autoload(prog)) continue;
    std::string section = bpf_program__section_name(prog);
    if (section.rfind("tp_btf/", 0) != 0) continue;
    std::string tp = section.substr(section.find('/') + 1);
    if (btf__find_by_name_kind(vmlinux, ("btf_trace_" + tp).c_str(), BTF_KIND_TYPEDEF) < 0) {
      if (tp == "sched_switch") {
        return FailedPrecondition("kernel has no BTF for tracepoint sched_switch — hint: "
                                  "gpuwhy needs a kernel with CONFIG_DEBUG_INFO_BTF");
      }
      bpf_program__set_autoload(prog, false);
      std::lock_guard<std::mutex> lock(notes_mu_);
      notes_.push_back("host: tracepoint " + tp + " not available on this kernel; skipped");
    }
  }
  vmlinux_btf.Reset();
  if (int err = host_bpf__load(skel); err != 0) return BpfError("load host BPF programs", err);
  bpf_object__for_each_program(prog, skel->obj) {
    if (!bpf_program__autoload(prog) || prog == skel->progs.gw_cpu_sample) continue;
    bpf_link* link = bpf_program__attach(prog);
    if (!link) {
      int err = errno;
      return BpfError(std::string("attach host program ") + bpf_program__name(prog) + " to " +
                          bpf_program__section_name(prog),
                      err);
    }
    links_.emplace_back(link);
  }
  if (profile) RETURN_IF_ERROR(AttachProfile(context.profile_hz));
  tracked_fd_ = bpf_map__fd(skel->maps.tracked);
  competitors_fd_ = bpf_map__fd(skel->maps.competitors);
  drops_fd_ = bpf_map__fd(skel->maps.drops);
  emitted_fd_ = bpf_map__fd(skel->maps.emitted);
  fault_counts_fd_ = bpf_map__fd(skel->maps.fault_counts);
  ring_.Reset(ring_buffer__new(bpf_map__fd(skel->maps.events), &HostSource::OnRecord, this,
                               nullptr));
  if (!ring_) return BpfError("create host ring buffer consumer", errno);
  started_ = true;
  last_fault_drain_ns_ = MonoNowNs();
  // pid 0 appears as other_pid when a CPU went idle.
  if (context_.sink) {
    ProcessInfo idle;
    idle.pid = 0;
    idle.name = "<idle>";
    idle.comm = "swapper";
    context_.sink->OnProcess(idle);
  }
  known_[0] = KnownProcess{"swapper", false, false, {}};
  if (options_.seed_from_proc) {
    for (int32_t pid : context_.pids) {
      if (!std::ifstream(options_.proc_root + "/" + std::to_string(pid) + "/stat").good()) {
        return NotFound("--pid " + std::to_string(pid) + ": no such process");
      }
      RETURN_IF_ERROR(Track(pid, GW_TRACKED_FILTER));
    }
    for (int32_t pid : context_.pids_if_alive) {
      if (!std::ifstream(options_.proc_root + "/" + std::to_string(pid) + "/stat").good()) continue;
      RETURN_IF_ERROR(Track(pid, GW_TRACKED_FILTER));
    }
    SeedFromProc();
  }
  return Status::Ok();
}

int HostSource::tracked_map_fd() const { return tracked_fd_; }

int HostSource::irq_state_fd() const {
  return skel_ ? bpf_map__fd(skel_.get()->maps.irq_depth) : -1;
}

std::map<int32_t, int32_t> HostSource::ParentMap() const {
  std::map<int32_t, int32_t> parent;
  for (int32_t pid : ListPids(options_.proc_root)) parent[pid] = ReadPpid(options_.proc_root, pid);
  return parent;
}

Status HostSource::Track(int32_t pid, uint32_t flags) {
  if (!started_) return FailedPrecondition("host source not started");
  auto insert = [&](int32_t p, uint32_t f) -> Status {
    __u32 key = static_cast<__u32>(p);
    __u32 value = f;
    __u32 existing = 0;
    if (bpf_map_lookup_elem(tracked_fd_, &key, &existing) == 0) {
      value |= existing;
    }
    if (bpf_map_update_elem(tracked_fd_, &key, &value, BPF_ANY) != 0) {
      int err = errno;
      return ErrnoStatus("add pid " + std::to_string(p) + " to the tracked set", err);
    }
    recheck_.erase(p);
    return Status::Ok();
  };
  RETURN_IF_ERROR(insert(pid, flags));
  NameProcess(pid, "", true, 0);
  // Existing descendants: children forked before the parent was tracked.
  std::map<int32_t, int32_t> parent = ParentMap();
  std::map<int32_t, std::vector<int32_t>> children;
  for (auto [child, ppid] : parent) children[ppid].push_back(child);
  std::deque<int32_t> queue{pid};
  std::set<int32_t> seen{pid};
  while (!queue.empty()) {
    int32_t p = queue.front();
    queue.pop_front();
    for (int32_t c : children[p]) {
      if (!seen.insert(c).second) continue;
      RETURN_IF_ERROR(insert(c, GW_TRACKED_CHILD));
      NameProcess(c, "", true, p);
      queue.push_back(c);
    }
  }
  return Status::Ok();
}

bool HostSource::IsTracked(int32_t pid) const {
  if (tracked_fd_ < 0) return false;
  __u32 key = static_cast<__u32>(pid), value = 0;
  return bpf_map_lookup_elem(tracked_fd_, &key, &value) == 0;
}

namespace {
std::vector<int32_t> MapKeys(int fd) {
  std::vector<int32_t> keys;
  if (fd < 0) return keys;
  __u32 key = 0, next = 0;
  __u32* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    keys.push_back(static_cast<int32_t>(next));
    key = next;
    prev = &key;
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}
}  // namespace

std::vector<int32_t> HostSource::TrackedPids() const { return MapKeys(tracked_fd_); }
std::vector<int32_t> HostSource::CompetitorPids() const { return MapKeys(competitors_fd_); }

void HostSource::SeedFromProc() {
  bool filtered =
      !context_.pids.empty() || !context_.pids_if_alive.empty() || !context_.comms.empty();
  // --pid alone: the listed processes and their descendants were tracked at Start and forks
  // join in BPF; no other process can qualify, so nothing in /proc is read every second.
  if (filtered && context_.comms.empty()) return;
  int64_t now = MonoNowNs();
  std::vector<int32_t> pids = ListPids(options_.proc_root);
  for (int32_t pid : pids) {
    if (pid == getpid()) continue;
    auto check = recheck_.find(pid);
    if (check != recheck_.end() && now < check->second.next_ns) continue;
    if (IsTracked(pid)) continue;
    std::string dir = options_.proc_root + "/" + std::to_string(pid);
    uint32_t flags = 0;
    bool kernel_thread = false;
    if (filtered) {
      // A comm can change at any exec: rechecked every second.
      std::string comm = Trim(ReadSmallFile(dir + "/comm"));
      for (const std::string& want : context_.comms) {
        if (comm == want) flags = GW_TRACKED_FILTER;
      }
    } else {
      std::vector<std::string> files = MappedFiles(pid, options_.proc_root);
      kernel_thread = files.empty() && ReadSmallFile(dir + "/cmdline").empty();
      for (const std::string& path : files) {
        CudaLibKind kind;
        if (ClassifyCudaLibrary(path, &kind)) flags = GW_TRACKED_CUDA;
      }
    }
    if (flags == 0) {
      RecheckState& state = recheck_[pid];
      if (filtered) {
        state.interval_ns = 1'000'000'000;
      } else if (kernel_thread) {
        state.interval_ns = INT64_MAX / 4;
      } else {
        state.interval_ns = std::clamp<int64_t>(state.interval_ns * 2, 1'000'000'000,
                                                32'000'000'000);
      }
      state.next_ns = now + state.interval_ns - 100'000'000;  // a little early: 1 Hz ticks
      continue;
    }
    Status st = Track(pid, flags);
    if (!st.ok()) {
      std::lock_guard<std::mutex> lock(notes_mu_);
      notes_.push_back("host: " + st.message());
    }
  }
  // Forget pids that are gone (a reused pid starts over).
  std::set<int32_t> alive(pids.begin(), pids.end());
  for (auto it = recheck_.begin(); it != recheck_.end();) {
    it = alive.count(it->first) ? std::next(it) : recheck_.erase(it);
  }
}

void HostSource::Rediscover() {
  if (!started_ || stopped_) return;
  if (options_.seed_from_proc) SeedFromProc();
  RefreshNames();
  DrainFaultCounts(false);
}

void HostSource::RefreshNames() {
  if (!context_.sink) return;
  // Workers often rename themselves after fork (pt_data_worker:0): pick up comm changes.
  for (auto& [pid, known] : known_) {
    if (pid == 0 || known.exited) continue;
    std::string dir = options_.proc_root + "/" + std::to_string(pid);
    std::string comm = Trim(ReadSmallFile(dir + "/comm"));
    if (comm.empty() || comm == known.comm) continue;
    known.comm = comm;
    std::vector<std::string> argv = SplitCmdline(ReadSmallFile(dir + "/cmdline"));
    if (!argv.empty()) known.argv = argv;
    ProcessInfo info;
    info.pid = pid;
    info.comm = comm;
    info.name = ProcessDisplayName(comm, known.argv);
    info.tracked = known.tracked;
    context_.sink->OnProcess(info);
  }
}

void HostSource::NameProcess(int32_t pid, const std::string& fallback_comm, bool tracked,
                             int32_t ppid) {
  auto it = known_.find(pid);
  if (it != known_.end() && (it->second.tracked || !tracked)) return;
  ProcessInfo info;
  info.pid = pid;
  std::string dir = options_.proc_root + "/" + std::to_string(pid);
  info.comm = Trim(ReadSmallFile(dir + "/comm"));
  std::string raw_cmdline = ReadSmallFile(dir + "/cmdline");
  std::vector<std::string> argv = SplitCmdline(raw_cmdline);
  for (const std::string& a : argv) {
    if (!info.cmdline.empty()) info.cmdline += ' ';
    info.cmdline += a;
  }
  if (info.comm.empty()) info.comm = fallback_comm;
  if (info.comm.empty()) info.comm = "pid " + std::to_string(pid);
  info.name = ProcessDisplayName(info.comm, argv);
  info.ppid = ppid > 0 ? ppid : ReadPpid(options_.proc_root, pid);
  if (int64_t start = ReadStartMonoNs(options_.proc_root, pid); start > 0) {
    info.first_ts_ns = context_.clock.ToSession(static_cast<uint64_t>(start));
  }
  info.tracked = tracked;
  known_[pid] = KnownProcess{info.comm, tracked, false, argv};
  if (context_.sink) context_.sink->OnProcess(info);
}

int HostSource::OnRecord(void* ctx, void* data, size_t size) {
  auto* self = static_cast<HostSource*>(ctx);
  if (size < sizeof(gw_host_record)) return 0;
  gw_host_record record;
  std::memcpy(&record, data, sizeof record);
  self->Decode(record);
  return 0;
}

int64_t HostSource::FilePathId(int32_t pid, uint64_t addr, uint64_t inode) {
  if (!context_.sink) return kNull;
  auto find = [&](const std::vector<Mapping>& maps) -> const Mapping* {
    for (const Mapping& m : maps) {
      if (addr >= m.start && addr < m.end) return &m;
    }
    for (const Mapping& m : maps) {
      if (inode != 0 && m.inode == inode) return &m;
    }
    return nullptr;
  };
  const Mapping* hit = nullptr;
  auto it = maps_cache_.find(pid);
  if (it != maps_cache_.end()) hit = find(it->second);
  int64_t now = MonoNowNs();
  if (!hit && now - maps_read_ns_[pid] > 100'000'000) {  // re-read at most 10×/s per pid
    maps_read_ns_[pid] = now;
    std::vector<Mapping> maps;
    std::istringstream in(ReadSmallFile(options_.proc_root + "/" + std::to_string(pid) + "/maps"));
    std::string line;
    while (std::getline(in, line)) {
      unsigned long long start = 0, end = 0, ino = 0;
      char perms[8], offset[32], dev[16];
      int consumed = 0;
      if (std::sscanf(line.c_str(), "%llx-%llx %7s %31s %15s %llu %n", &start, &end, perms,
                      offset, dev, &ino, &consumed) < 6 ||
          ino == 0) {
        continue;
      }
      maps.push_back({start, end, ino, Trim(line.substr(static_cast<size_t>(consumed)))});
    }
    maps_cache_[pid] = std::move(maps);
    hit = find(maps_cache_[pid]);
  }
  if (!hit) return kNull;
  return context_.sink->InternString(hit->path);
}

int64_t HostSource::DeviceNameId(uint64_t dev) {
  if (!context_.sink || dev == 0) return kNull;
  auto it = device_ids_.find(dev);
  if (it != device_ids_.end()) return it->second;
  uint64_t major = dev >> 20, minor = dev & 0xfffff;
  std::string name = std::to_string(major) + ":" + std::to_string(minor);
  std::istringstream in(ReadSmallFile("/sys/dev/block/" + name + "/uevent"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("DEVNAME=", 0) == 0) name = line.substr(8);
  }
  int64_t id = context_.sink->InternString(name);
  device_ids_[dev] = id;
  return id;
}

void HostSource::Decode(const gw_host_record& r) {
  ++consumed_;
  DecodeHostRecord(r, context_.clock, *this, &batch_);
}

void HostSource::SawProcess(int32_t pid, const std::string& comm, bool tracked, int32_t ppid) {
  NameProcess(pid, comm, tracked, ppid);
}

void HostSource::ProcessExec(int32_t pid, const std::string& comm) {
  known_.erase(pid);  // new program: new name and cmdline
  maps_cache_.erase(pid);
  NameProcess(pid, comm, true, 0);
}

void HostSource::ProcessFork(int32_t parent, int32_t child, const std::string& comm,
                             int64_t ts_ns) {
  known_.erase(child);
  NameProcess(child, comm, true, parent);
  if (context_.sink) {
    ProcessInfo first;
    first.pid = child;
    first.first_ts_ns = ts_ns;
    first.tracked = true;
    context_.sink->OnProcess(first);
  }
}

void HostSource::ProcessExit(int32_t pid, const std::string& comm, bool tracked, int32_t ppid,
                             int64_t ts_ns, int64_t status) {
  NameProcess(pid, comm, tracked, ppid);
  if (context_.sink) {
    ProcessInfo info;
    info.pid = pid;
    info.comm = comm;
    info.exit_ts_ns = ts_ns;
    info.exit_code = status;
    info.tracked = tracked;
    // The store writes comm as the name when none is given: always send the display
    // name, from the comm at exit (it may have renamed itself since first sight).
    auto it = known_.find(pid);
    info.name =
        ProcessDisplayName(comm, it != known_.end() ? it->second.argv : std::vector<std::string>{});
    context_.sink->OnProcess(info);
  }
  if (auto it = known_.find(pid); it != known_.end()) it->second.exited = true;
  exited_fault_pids_.insert(pid);
  maps_cache_.erase(pid);
  maps_read_ns_.erase(pid);
}

int64_t HostSource::Poll() {
  if (!ring_) return 0;
  int n = ring_buffer__consume(ring_.get());
  if (!batch_.empty()) {
    if (context_.sink) context_.sink->OnEvents(batch_.data(), batch_.size());
    batch_.clear();
  }
  return n < 0 ? 0 : n;
}

void HostSource::DrainFaultCounts(bool final_drain) {
  if (fault_counts_fd_ < 0) return;
  int64_t now = MonoNowNs();
  if (!final_drain && now - last_fault_drain_ns_ < 900'000'000) return;
  last_fault_drain_ns_ = now;
  std::vector<OpCount> counts;
  int64_t sec = context_.clock.ToSession(static_cast<uint64_t>(now)) / 1'000'000'000;
  for (int32_t pid : MapKeys(fault_counts_fd_)) {
    __u32 key = static_cast<__u32>(pid);
    __u64 total = 0;
    if (bpf_map_lookup_elem(fault_counts_fd_, &key, &total) != 0) continue;
    uint64_t& last = fault_totals_[pid];
    if (total > last) {
      OpCount c;
      c.sec = sec;
      c.pid = pid;
      c.op = Op::kPageFault;
      c.count = static_cast<int64_t>(total - last);
      counts.push_back(c);
      last = total;
    }
    if (exited_fault_pids_.count(pid)) {
      bpf_map_delete_elem(fault_counts_fd_, &key);
      fault_totals_.erase(pid);
      exited_fault_pids_.erase(pid);
    }
  }
  if (!counts.empty() && context_.sink) context_.sink->OnOpCounts(counts);
}

uint64_t HostSource::SumPerCpu(int map_fd, uint32_t slot) const {
  if (map_fd < 0) return 0;
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return 0;
  std::vector<__u64> values(static_cast<size_t>(cpus));
  if (bpf_map_lookup_elem(map_fd, &slot, values.data()) != 0) return 0;
  uint64_t sum = 0;
  for (__u64 v : values) sum += v;
  return sum;
}

int64_t HostSource::RecordsEmitted() const {
  int64_t total = 0;
  for (uint32_t slot = 0; slot < GW_EMIT_SLOTS; ++slot) {
    total += static_cast<int64_t>(SumPerCpu(emitted_fd_, slot));
  }
  return total;
}

DropCounts HostSource::Drops() const {
  static const char* kNames[GW_DROP_SLOTS] = {
      "host_sched_ring", "host_mem_ring",    "host_io_ring",       "host_proc_ring",
      "host_tracked_full", "host_inflight_full", "host_fault_count_full"};
  DropCounts drops;
  for (uint32_t slot = 0; slot < GW_DROP_SLOTS; ++slot) {
    drops[kNames[slot]] = static_cast<int64_t>(SumPerCpu(drops_fd_, slot));
  }
  return drops;
}

std::vector<std::string> HostSource::TakeNotes() {
  std::lock_guard<std::mutex> lock(notes_mu_);
  std::vector<std::string> out;
  out.swap(notes_);
  return out;
}

void HostSource::Stop() {
  if (stopped_) return;
  stopped_ = true;
  // Detaching waits for programs in flight (tracepoint unregistration synchronizes), so
  // every record reserved before this point is committed and the final Poll() sees it.
  links_.clear();
  DrainFaultCounts(true);
}

}  // namespace gw
