#include "sources/cuda/cuda_source.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cxxabi.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <unordered_set>

#include "cuda.skel.h"
#include "discover/elf_symbols.h"
#include "sources/cuda/cuda_abi.h"
#include "sources/cuda/cuda_decode.h"
#include "sources/cuda/cuda_probes.h"
#include "sources/stacks/stack_registry.h"
#include "store/ops.h"
#include "symbolize/process_maps.h"
#include "symbolize/symbolizer.h"

static_assert(sizeof(gw_cuda_call_record) == 80, "gw_cuda_call_record layout changed");
static_assert(sizeof(gw_cuda_name_record) == 24 + GW_CUDA_NAME_MAX,
              "gw_cuda_name_record layout changed");
static_assert(sizeof(gw_cuda_launch_key) == 16, "gw_cuda_launch_key layout changed");
static_assert(sizeof(gw_cuda_launch_count) == 8, "gw_cuda_launch_count layout changed");
static_assert(sizeof(gw_cuda_work) == 16, "gw_cuda_work layout changed");

namespace gw {

namespace cuda_internal {
void DestroySkeleton(cuda_bpf* skel) { cuda_bpf__destroy(skel); }
void FreeRing(ring_buffer* ring) { ring_buffer__free(ring); }
}  // namespace cuda_internal

namespace {

using cuda_internal::ProbeClass;
using cuda_internal::Probes;
using cuda_internal::ProbeSpec;
using cuda_internal::SpecOf;

void DestroyLink(bpf_link* link) { bpf_link__destroy(link); }
using ScopedLink = ScopedResource<bpf_link*, DestroyLink, nullptr>;

// Multi-uprobe links (kernel ≥ 6.6): one BPF link attaches a program to many offsets of one
// file. libbpf 1.1.2 has no API for them, so they are created with the bpf() syscall. They
// attach and, above all, detach far faster than one perf-event uprobe per function: every
// perf-event uprobe waits for its own RCU grace period on detach (~60 ms each here, ~6 s for
// the ~90 probes of a runtime+driver pair), a multi link waits once.
constexpr uint32_t kBpfLinkCreate = 28;         // enum bpf_cmd BPF_LINK_CREATE
constexpr uint32_t kTraceUprobeMulti = 48;      // enum bpf_attach_type BPF_TRACE_UPROBE_MULTI
constexpr uint32_t kUprobeMultiReturn = 1;      // BPF_F_UPROBE_MULTI_RETURN

// The prefix of union bpf_attr that BPF_LINK_CREATE reads for BPF_TRACE_UPROBE_MULTI.
struct UprobeMultiAttr {
  uint32_t prog_fd;
  uint32_t target_fd;
  uint32_t attach_type;
  uint32_t flags;
  uint64_t path;             // const char*
  uint64_t offsets;          // const unsigned long*
  uint64_t ref_ctr_offsets;  // const unsigned long*, optional
  uint64_t cookies;          // const __u64*, optional
  uint32_t cnt;
  uint32_t multi_flags;      // BPF_F_UPROBE_MULTI_RETURN
  uint32_t pid;              // 0: every process
  uint32_t pad;
};
static_assert(sizeof(UprobeMultiAttr) == 64, "bpf_attr.link_create.uprobe_multi layout");

// Returns the link fd, or -errno.
int CreateUprobeMultiLink(int prog_fd, const std::string& path,
                          const std::vector<unsigned long>& offsets,
                          const std::vector<uint64_t>& cookies, bool retprobe) {
  UprobeMultiAttr attr{};
  attr.prog_fd = static_cast<uint32_t>(prog_fd);
  attr.attach_type = kTraceUprobeMulti;
  attr.path = reinterpret_cast<uint64_t>(path.c_str());
  attr.offsets = reinterpret_cast<uint64_t>(offsets.data());
  attr.cookies = reinterpret_cast<uint64_t>(cookies.data());
  attr.cnt = static_cast<uint32_t>(offsets.size());
  attr.multi_flags = retprobe ? kUprobeMultiReturn : 0;
  long fd = syscall(__NR_bpf, kBpfLinkCreate, &attr, sizeof attr);
  return fd < 0 ? -errno : static_cast<int>(fd);
}

constexpr UnseenLaunchPath kUnseenDriverLaunches[] = {
    {"cuLaunchCooperativeKernel", "cooperative kernels"},
    {"cuLaunchCooperativeKernel_ptsz", "cooperative kernels"},
    {"cuLaunchCooperativeKernelMultiDevice", "multi-device cooperative kernels"},
};

std::vector<UnseenLaunchPath> UnseenIn(const ElfSymbolTable& symbols, CudaLibKind kind) {
  std::vector<UnseenLaunchPath> out;
  if (kind != CudaLibKind::kDriver) return out;
  for (const UnseenLaunchPath& p : kUnseenDriverLaunches) {
    if (symbols.Find(p.symbol) != nullptr) out.push_back(p);
  }
  return out;
}

std::string PrivilegeHint(int err) {
  if (err == EPERM || err == EACCES) {
    return " — hint: run as root (sudo) or grant CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN";
  }
  return "";
}

std::string Demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) {
    std::free(out);
    return name;
  }
  std::string result(out);
  std::free(out);
  return result;
}

// One slot of a per-CPU array of u64s, a value per CPU; false when the map cannot be read.
bool PerCpuValues(bpf_map* map, uint32_t slot, std::vector<uint64_t>* values) {
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return false;
  values->assign(static_cast<size_t>(cpus), 0);
  return bpf_map__lookup_elem(map, &slot, sizeof slot, values->data(),
                              values->size() * sizeof(uint64_t), 0) == 0;
}

// Sums each of the first `slots` slots of a per-CPU array of u64 counters over the CPUs.
// false when the map cannot be read.
bool SumPerCpuSlots(bpf_map* map, uint32_t slots, uint64_t* out) {
  std::vector<uint64_t> values;
  for (uint32_t slot = 0; slot < slots; ++slot) {
    if (!PerCpuValues(map, slot, &values)) return false;
    out[slot] = 0;
    for (uint64_t v : values) out[slot] += v;
  }
  return true;
}

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

struct CudaSource::AttachedLibrary {
  CudaLibrary library;
  std::vector<ScopedFd> multi_links;  // multi-uprobe link fds
  std::vector<ScopedLink> links;      // perf-event uprobes (fallback)
  size_t probes = 0;                  // function entry/return points attached
  // The launch probes, kept apart: attached only in the counting seconds of the launch duty
  // cycle (UpdateLaunchDuty), and a runtime library's detached for good once every runtime
  // launch is seen to reach a driver launch (DetachNestedRuntimeLaunches).
  std::vector<unsigned long> launch_offsets;
  std::vector<uint64_t> launch_cookies;
  std::vector<const char*> launch_symbols;
  std::vector<ScopedFd> launch_multi_links;
  std::vector<ScopedLink> launch_links;
  size_t launch_probes = 0;   // attached now
  bool launches_retired = false;  // runtime launches proven nested: never attached again
};

struct CudaSource::ProcessState {
  CudaProcessMemory memory;  // allocations and pinned ranges the decoder keeps
  std::unordered_map<uint64_t, std::string> names;     // kernel handle → name
  std::unordered_map<uint64_t, uint64_t> aliases;      // host stub → CUfunction it reached
  std::unordered_map<uint64_t, int64_t> name_ids;      // kernel handle → interned name id
  std::unordered_set<uint64_t> unnamed;                // no symbol / no readable driver name
  std::optional<ProcessMaps> maps;                     // for host stubs: read once, re-read
                                                       // when a stub lies outside it
};

std::vector<UnseenLaunchPath> UnseenLaunchPaths(const std::string& path, CudaLibKind kind) {
  StatusOr<ElfSymbolTable> symbols = ElfSymbolTable::Load(path);
  if (!symbols.ok()) return {};
  return UnseenIn(*symbols, kind);
}

std::vector<std::string> ProbedLaunchSymbols(CudaLibKind kind) {
  std::vector<std::string> out;
  for (const ProbeSpec& spec : Probes()) {
    bool graph = spec.op == Op::kCudaGraphLaunch;  // a launch of a graph's kernels
    if (spec.library == kind && (spec.probe == ProbeClass::kLaunch || graph)) {
      out.push_back(spec.symbol);
    }
  }
  return out;
}

std::vector<std::string> ProbedSymbols(CudaLibKind kind) {
  std::vector<std::string> out;
  for (const ProbeSpec& spec : Probes()) {
    if (spec.library == kind) out.push_back(spec.symbol);
  }
  return out;
}

CudaSource::CudaSource(CudaSourceOptions options)
    : options_(std::move(options)),
      graphs_([this](const std::string& text) { return context_.sink->InternString(text); },
              [this](int32_t pid, uint64_t handle, bool host_stub) {
                return KernelName(static_cast<uint32_t>(pid), handle, host_stub);
              }) {}

CudaSource::~CudaSource() { Stop(); }

StatusOr<std::unique_ptr<CudaSource>> CudaSource::Create(CudaSourceOptions options) {
  uint32_t ring = options.ring_bytes;
  if (ring < 4096 || (ring & (ring - 1)) != 0) {
    return InvalidArgument("CUDA ring buffer size " + std::to_string(ring) +
                           " is not a power of two ≥ 4096");
  }
  auto source = std::unique_ptr<CudaSource>(new CudaSource(std::move(options)));
  source->skel_.Reset(cuda_bpf__open());
  if (!source->skel_) return ErrnoStatus("open CUDA BPF object", errno);
  return source;
}

Status CudaSource::Configure(const SourceContext& context) {
  cuda_bpf* skel = skel_.get();
  skel->rodata->filter_tracked =
      (!context.pids.empty() || !context.pids_if_alive.empty() || !context.comms.empty()) ? 1 : 0;
  skel->rodata->launch_sample_every = options_.launch_sample_every;
  if (options_.row_budget) {
    skel->rodata->skip_nested_rows = 1;
    skel->rodata->call_row_min_ns = options_.call_row_min_ns;
    skel->rodata->call_sample_every = options_.call_sample_every;
    skel->rodata->row_tokens_per_s = options_.row_tokens_per_s;
    skel->rodata->session_mono_start_ns = static_cast<uint64_t>(context.clock.mono_start_ns);
  }
  if (context.stack_registry != nullptr && context.stacks) {
    skel->rodata->capture_stacks = 1;
    skel->rodata->stack_interval_ns = context.stack_interval_ns();
    skel->rodata->stack_burst = std::max<uint32_t>(1, context.stack_rate / 5);
    skel->rodata->stack_always_ns = options_.stack_always_ns;
    RETURN_IF_ERROR(context.stack_registry->ShareMaps(skel->obj));
  }
  if (int err = bpf_map__set_max_entries(skel->maps.events, options_.ring_bytes); err != 0) {
    return ErrnoStatus("size CUDA ring buffer", -err);
  }
  if (context.tracked_map_fd >= 0) {
    bpf_map_info info{};
    uint32_t info_len = sizeof info;
    if (bpf_obj_get_info_by_fd(context.tracked_map_fd, &info, &info_len) != 0) {
      return ErrnoStatus("inspect the shared tracked-process map", errno);
    }
    if (info.key_size != sizeof(uint32_t) || info.value_size != sizeof(uint32_t)) {
      return Internal("shared tracked-process map has key/value sizes " +
                      std::to_string(info.key_size) + "/" + std::to_string(info.value_size) +
                      "; the CUDA source expects 4/4 (tgid → u32 flags)");
    }
    if (int err = bpf_map__reuse_fd(skel->maps.tracked, context.tracked_map_fd); err != 0) {
      return ErrnoStatus("share the tracked-process map with the CUDA source", -err);
    }
  }
  return Status::Ok();
}

Status CudaSource::Start(const SourceContext& context) {
  if (started_) return FailedPrecondition("CUDA source started twice");
  context_ = context;
  if (context_.sink == nullptr) return InvalidArgument("CUDA source started without a sink");
  RETURN_IF_ERROR(Configure(context));
  cuda_bpf* skel = skel_.get();
  // Programs loaded for multi-uprobe links cannot be attached as perf-event uprobes and vice
  // versa: try multi first, and on a kernel without it reopen and load the classic way.
  for (bpf_program* program = bpf_object__next_program(skel->obj, nullptr);
       options_.multi_uprobe && program != nullptr;
       program = bpf_object__next_program(skel->obj, program)) {
    bpf_program__set_expected_attach_type(program,
                                          static_cast<bpf_attach_type>(kTraceUprobeMulti));
  }
  int err = options_.multi_uprobe ? cuda_bpf__load(skel) : -EOPNOTSUPP;
  multi_links_ = err == 0;
  if (err != 0 && err != -EPERM && err != -EACCES) {
    skel_.Reset(cuda_bpf__open());
    if (!skel_) return ErrnoStatus("open CUDA BPF object", errno);
    RETURN_IF_ERROR(Configure(context));
    skel = skel_.get();
    err = cuda_bpf__load(skel);
  }
  if (err != 0) {
    return Status(err == -EPERM || err == -EACCES ? StatusCode::kPermissionDenied
                                                  : StatusCode::kFailedPrecondition,
                  std::string("load CUDA BPF programs: ") + std::strerror(-err) +
                      PrivilegeHint(-err));
  }
  ring_.Reset(ring_buffer__new(bpf_map__fd(skel->maps.events), &CudaSource::OnRecord, this,
                               nullptr));
  if (!ring_) return ErrnoStatus("open CUDA ring buffer", errno);
  current_sec_ = context_.clock.ToSession(static_cast<uint64_t>(MonotonicNs())) / 1000000000;
  started_ = true;

  // Attach to what exists now. The first failure that is about privileges is fatal; a
  // library that cannot be read or probed is a note.
  for (const CudaLibrary& library : Libraries()) {
    Status status = AttachLibrary(library);
    if (status.code() == StatusCode::kPermissionDenied) return status;
    if (!status.ok()) AddNote(status.message());
  }
  return Status::Ok();
}

namespace {

// One program on some offsets of one file: one multi link, else (one bad offset fails the whole
// link) one link per offset; without multi links, one perf-event uprobe per offset. A failure
// about privileges is returned; any other goes to `notes` and the offset is skipped.
Status AttachGroup(bool multi_links, bpf_program* program, bool retprobe, const std::string& path,
                   const std::vector<unsigned long>& offsets, const std::vector<uint64_t>& cookies,
                   const std::vector<const char*>& symbols, std::vector<ScopedFd>* fds,
                   std::vector<ScopedLink>* links, size_t* count,
                   std::vector<std::string>* notes) {
  auto failure = [&](const char* symbol, int err) {
    return Status(err == EPERM || err == EACCES ? StatusCode::kPermissionDenied
                                                : StatusCode::kFailedPrecondition,
                  std::string("attach ") + (retprobe ? "uretprobe " : "uprobe ") + symbol +
                      " in " + path + ": " + std::strerror(err) + PrivilegeHint(err));
  };
  if (multi_links) {
    int prog_fd = bpf_program__fd(program);
    int fd = CreateUprobeMultiLink(prog_fd, path, offsets, cookies, retprobe);
    if (fd >= 0) {
      fds->emplace_back(fd);
      *count += offsets.size();
      return Status::Ok();
    }
    for (size_t i = 0; i < offsets.size(); ++i) {
      fd = CreateUprobeMultiLink(prog_fd, path, {offsets[i]}, {cookies[i]}, retprobe);
      if (fd < 0) {
        Status status = failure(symbols[i], -fd);
        if (status.code() == StatusCode::kPermissionDenied) return status;
        notes->push_back(status.message());
        continue;
      }
      fds->emplace_back(fd);
      *count += 1;
    }
    return Status::Ok();
  }
  for (size_t i = 0; i < offsets.size(); ++i) {
    LIBBPF_OPTS(bpf_uprobe_opts, opts);
    opts.bpf_cookie = cookies[i];
    opts.retprobe = retprobe;
    bpf_link* link = bpf_program__attach_uprobe_opts(program, -1, path.c_str(), offsets[i], &opts);
    if (link == nullptr) {
      Status status = failure(symbols[i], errno);
      if (status.code() == StatusCode::kPermissionDenied) return status;
      notes->push_back(status.message());
      continue;
    }
    links->emplace_back(link);
    *count += 1;
  }
  return Status::Ok();
}

}  // namespace

Status CudaSource::AttachLibrary(const CudaLibrary& library) {
  struct stat st;
  if (stat(library.path.c_str(), &st) != 0) {
    return ErrnoStatus("stat CUDA library " + library.path, errno);
  }
  {
    std::lock_guard<std::mutex> lock(attach_mu_);
    // One attachment per file: uprobes live on the inode, so two paths to one file would
    // fire twice.
    if (!seen_files_.insert({st.st_dev, st.st_ino}).second) return Status::Ok();
  }
  ASSIGN_OR_RETURN(ElfSymbolTable symbols, ElfSymbolTable::Load(library.path));
  auto attached = std::make_unique<AttachedLibrary>();
  attached->library = library;
  std::vector<std::string> missing;
  // Entry and return points per program: one multi link each, or one perf-event uprobe per
  // point. Return probes go first: a call entered between the two attaches then has a
  // return without an entry, which the exit program ignores, rather than an entry without a
  // return left on the thread's stack.
  struct Group {
    bpf_program* program;
    bool retprobe;
    std::vector<unsigned long> offsets;
    std::vector<uint64_t> cookies;
    std::vector<const char*> symbols;
  };
  cuda_bpf* skel = skel_.get();
  // Indexes: 0-2 return programs (attached first), 3-5 entry programs.
  std::vector<Group> groups = {
      {skel->progs.gw_cuda_exit, true, {}, {}, {}},
      {skel->progs.gw_cuda_name_exit, true, {}, {}, {}},
      {skel->progs.gw_cuda_register_exit, true, {}, {}, {}},
      {skel->progs.gw_cuda_enter, false, {}, {}, {}},
      {skel->progs.gw_cuda_launch, false, {}, {}, {}},
      {skel->progs.gw_cuda_count, false, {}, {}, {}},
  };
  auto add = [&](size_t group, const ProbeSpec& spec, uint64_t offset, uint64_t flags = 0) {
    groups[group].offsets.push_back(static_cast<unsigned long>(offset));
    groups[group].cookies.push_back(spec.fn | flags);
    groups[group].symbols.push_back(spec.symbol);
  };
  const bool budget = options_.row_budget;
  for (const ProbeSpec& spec : Probes()) {
    if (spec.library != library.kind) continue;
    const ElfSymbol* symbol = symbols.Find(spec.symbol);
    if (symbol == nullptr) {
      missing.push_back(spec.symbol);
      continue;
    }
    uint64_t offset = ElfSymbolTable::ProbeOffset(*symbol);
    switch (spec.probe) {
      case ProbeClass::kShortCall:
      case ProbeClass::kCall: {
        uint64_t flags =
            budget && spec.probe == ProbeClass::kShortCall ? GW_CUDA_COOKIE_AGGREGATE : 0;
        add(0, spec, offset, flags);
        add(3, spec, offset, flags);
        break;
      }
      case ProbeClass::kCount:
        if (budget) {
          add(5, spec, offset);
        } else {
          add(0, spec, offset);
          add(3, spec, offset);
        }
        break;
      case ProbeClass::kNameLookup:
        add(1, spec, offset);
        add(3, spec, offset);
        break;
      case ProbeClass::kRegister:
        add(2, spec, offset);
        add(3, spec, offset);
        break;
      case ProbeClass::kLaunch: add(4, spec, offset); break;
    }
  }
  for (const UnseenLaunchPath& p : UnseenIn(symbols, library.kind)) {
    AddNote(std::string("cuda: launches through ") + p.symbol + " (" + p.what +
            ") are not seen: " + library.path);
  }
  std::vector<std::string> notes;
  for (const Group& group : groups) {
    if (group.offsets.empty()) continue;
    if (group.program == skel->progs.gw_cuda_launch) {
      // The launch probes go to their own links: the duty cycle attaches and detaches them.
      attached->launch_offsets = group.offsets;
      attached->launch_cookies = group.cookies;
      attached->launch_symbols = group.symbols;
      if (launches_on_) {
        RETURN_IF_ERROR(AttachLaunchProbes(*attached, &notes));
        if (attached->launch_probes > 0) {
          std::lock_guard<std::mutex> lock(attach_mu_);
          CoverageOn(SessionNs());
        }
      }
      continue;
    }
    RETURN_IF_ERROR(AttachGroup(multi_links_, group.program, group.retprobe, library.path,
                                group.offsets,
                                group.cookies, group.symbols, &attached->multi_links,
                                &attached->links, &attached->probes, &notes));
  }
  for (std::string& n : notes) AddNote(std::move(n));
  size_t probes = attached->probes + attached->launch_probes;
  std::string note = "cuda: attached " + std::to_string(probes) + " probes to " + library.path +
                     (library.kind == CudaLibKind::kRuntime ? " (runtime)"
                      : library.kind == CudaLibKind::kNccl  ? " (nccl)"
                                                            : " (driver)");
  if (!missing.empty()) {
    note += "; not in this library, skipped:";
    for (const std::string& m : missing) note += " " + m;
  }
  AddNote(std::move(note));
  std::lock_guard<std::mutex> lock(attach_mu_);
  if (library.kind == CudaLibKind::kDriver) {
    // Runtime launches counted before this driver was probed could not pair: the nesting
    // proof starts over from here.
    for (const auto& other : libraries_) {
      if (other->library.kind == CudaLibKind::kRuntime && !other->launches_retired &&
          !other->launch_offsets.empty()) {
        nesting_rebase_ = true;
      }
    }
  }
  libraries_.push_back(std::move(attached));
  return Status::Ok();
}

Status CudaSource::AttachLaunchProbes(AttachedLibrary& library,
                                      std::vector<std::string>* notes) {
  if (library.launches_retired || library.launch_probes > 0 || library.launch_offsets.empty()) {
    return Status::Ok();
  }
  return AttachGroup(multi_links_, skel_.get()->progs.gw_cuda_launch, false, library.library.path,
                     library.launch_offsets, library.launch_cookies, library.launch_symbols,
                     &library.launch_multi_links, &library.launch_links, &library.launch_probes,
                     notes);
}

void CudaSource::DetachLaunchProbes(AttachedLibrary& library) {
  library.launch_multi_links.clear();  // closing the links removes the probes
  library.launch_links.clear();
  library.launch_probes = 0;
}

// The launch duty cycle: the launch probes stay attached until a second with launches has been
// counted (seconds before a job's first launch count nothing either way, so counting them adds
// nothing to an estimate), then one second in every duty from that one (the cycle's phase).
// Detached before a second's counts are flushed, attached after, so each flushed second holds
// the launches of one counting second.
bool CudaSource::LaunchSecond(int64_t sec) const { return CountingSecondOf(sec) == sec; }

int64_t CudaSource::CountingSecondOf(int64_t sec) const {
  if (options_.launch_duty <= 1 || launch_phase_ < 0) return sec;
  int64_t duty = static_cast<int64_t>(options_.launch_duty);
  return sec - ((sec - launch_phase_) % duty + duty) % duty;
}

int64_t CudaSource::SessionNs() const {
  return context_.clock.ToSession(static_cast<uint64_t>(MonotonicNs()));
}

void CudaSource::CoverageOn(int64_t now_ns) {
  if (covered_on_since_ns_ < 0) covered_on_since_ns_ = now_ns;
}

void CudaSource::CoverageOff(int64_t now_ns) {
  if (covered_on_since_ns_ < 0) return;
  // Split at second boundaries: a flush can come late (an attach holds the poll thread), and
  // readers compare coverage with calls filed by the second they happened in.
  for (int64_t t = std::max<int64_t>(0, covered_on_since_ns_); t < now_ns;) {
    int64_t sec = t / 1'000'000'000;
    int64_t end = std::min(now_ns, (sec + 1) * 1'000'000'000);
    covered_ns_[sec] += end - t;
    t = end;
  }
  covered_on_since_ns_ = -1;
  covered_off_ns_ = now_ns;
}

std::map<int64_t, int64_t> CudaSource::TakeCoverage(int64_t now_ns) {
  bool on = covered_on_since_ns_ >= 0;
  CoverageOff(now_ns);
  if (on) CoverageOn(now_ns);
  return std::exchange(covered_ns_, {});
}

void CudaSource::SetLaunchProbes(bool on) {
  std::lock_guard<std::mutex> lock(attach_mu_);
  if (on == launches_on_) return;
  launches_on_ = on;
  int64_t now = SessionNs();
  if (!on) {
    CoverageOff(now);
    launch_gaps_.push_back({now, INT64_MAX});
    if (launch_gaps_.size() > 256) launch_gaps_.pop_front();
  } else if (!launch_gaps_.empty() && launch_gaps_.back().second == INT64_MAX) {
    launch_gaps_.back().second = now;
  }
  // The driver's launch probes are attached before the runtime's and detached after them, so
  // every runtime launch counted has its driver launch probed: the nesting proof
  // (DetachNestedRuntimeLaunches) sees only launches that can pair.
  const CudaLibKind first = on ? CudaLibKind::kDriver : CudaLibKind::kRuntime;
  for (int pass = 0; pass < 2; ++pass) {
    for (auto& library : libraries_) {
      if ((library->library.kind == first) != (pass == 0)) continue;
      if (!on) {
        DetachLaunchProbes(*library);
        continue;
      }
      Status status = AttachLaunchProbes(*library, &notes_);
      if (!status.ok()) notes_.push_back(status.message());
      if (library->launch_probes > 0) CoverageOn(SessionNs());
    }
  }
}

std::vector<CudaLibrary> CudaSource::Libraries() {
  std::vector<CudaLibrary> found = FindLibraries();
  // Drivers first: a runtime launch probe attached before its driver's would see launches
  // that cannot be seen to nest, and the nesting proof would fail for no reason.
  std::stable_partition(found.begin(), found.end(),
                        [](const CudaLibrary& l) { return l.kind == CudaLibKind::kDriver; });
  return found;
}

std::vector<CudaLibrary> CudaSource::FindLibraries() {
  const std::vector<std::string>& extra = options_.libraries;
  if (options_.discover) return FindCudaLibraries(extra, "/proc", &maps_filter_);
  // Only the named files (tests, benchmarks): no /proc scan, no standard directories.
  std::vector<CudaLibrary> named;
  for (const std::string& path : extra) {
    CudaLibrary library;
    library.path = path;
    if (!ClassifyCudaLibrary(path, &library.kind)) {
      library.kind = path.find("cudart") != std::string::npos ? CudaLibKind::kRuntime
                     : path.find("nccl") != std::string::npos ? CudaLibKind::kNccl
                                                              : CudaLibKind::kDriver;
    }
    named.push_back(std::move(library));
  }
  return named;
}

void CudaSource::AttachDiscovered() {
  for (const CudaLibrary& library : Libraries()) {
    Status status = AttachLibrary(library);
    if (!status.ok()) AddNote(status.message());
  }
}

void CudaSource::Rediscover() {
  if (!started_ || stopped_) return;
  AttachDiscovered();
}

void CudaSource::AddNote(std::string note) {
  std::lock_guard<std::mutex> lock(attach_mu_);
  notes_.push_back(std::move(note));
}

std::vector<std::string> CudaSource::TakeNotes() {
  std::lock_guard<std::mutex> lock(attach_mu_);
  return std::exchange(notes_, {});
}

std::vector<std::string> CudaSource::AttachedLibraries() const {
  std::lock_guard<std::mutex> lock(attach_mu_);
  std::vector<std::string> paths;
  for (const auto& library : libraries_) paths.push_back(library->library.path);
  return paths;
}

size_t CudaSource::LinkCount() const {
  std::lock_guard<std::mutex> lock(attach_mu_);
  size_t n = 0;
  for (const auto& library : libraries_) n += library->probes + library->launch_probes;
  return n;
}

void CudaSource::DetachNestedRuntimeLaunches() {
  {
    std::lock_guard<std::mutex> lock(attach_mu_);
    bool any = false;
    for (const auto& library : libraries_) {
      any |= library->library.kind == CudaLibKind::kRuntime && !library->launches_retired &&
             !library->launch_offsets.empty();
    }
    if (!any) return;  // no runtime launch probe attached that could be retired
  }
  uint64_t totals[GW_CUDA_NEST_SLOTS] = {};
  if (!SumPerCpuSlots(skel_.get()->maps.launch_nesting, GW_CUDA_NEST_SLOTS, totals)) return;
  if (nesting_rebase_.exchange(false)) {
    nesting_seen_[GW_CUDA_NEST_RUNTIME] = totals[GW_CUDA_NEST_RUNTIME];
    nesting_seen_[GW_CUDA_NEST_PAIRED] = totals[GW_CUDA_NEST_PAIRED];
    return;
  }
  uint64_t runtime = totals[GW_CUDA_NEST_RUNTIME] - nesting_seen_[GW_CUDA_NEST_RUNTIME];
  uint64_t paired = totals[GW_CUDA_NEST_PAIRED] - nesting_seen_[GW_CUDA_NEST_PAIRED];
  if (runtime < kNestingProofLaunches) return;  // keep accumulating
  nesting_seen_[GW_CUDA_NEST_RUNTIME] = totals[GW_CUDA_NEST_RUNTIME];
  nesting_seen_[GW_CUDA_NEST_PAIRED] = totals[GW_CUDA_NEST_PAIRED];
  // Every runtime launch (to 1 in 1,000) made a driver launch: the driver probes alone see them.
  if (paired * 1000 < runtime * 999) {
    ++nesting_proofs_failed_;
    last_failed_window_[GW_CUDA_NEST_RUNTIME] = runtime;
    last_failed_window_[GW_CUDA_NEST_PAIRED] = paired;
    return;
  }
  size_t retired = 0;
  std::lock_guard<std::mutex> lock(attach_mu_);
  for (auto& library : libraries_) {
    if (library->library.kind != CudaLibKind::kRuntime || library->launches_retired) continue;
    DetachLaunchProbes(*library);
    library->launches_retired = true;
    ++retired;
  }
  if (retired == 0) return;
  runtime_launches_detached_ = true;
  notes_.push_back("cuda: " + std::to_string(paired) + " of " + std::to_string(runtime) +
                   " runtime launches reached a driver launch: the runtime launch probes were "
                   "detached and launches are counted at the driver, one probe hit each");
}

DropCounts CudaSource::Drops() const {
  DropCounts drops{{"cuda_bpf_reserve", 0}};
  if (!started_) return drops;
  uint64_t n[GW_CUDA_DROP_SLOTS] = {};
  if (!SumPerCpuSlots(skel_.get()->maps.drops, GW_CUDA_DROP_SLOTS, n)) return drops;
  drops["cuda_bpf_reserve"] = static_cast<int64_t>(n[GW_CUDA_DROP_RESERVE]);
  if (n[GW_CUDA_DROP_LAUNCH_MAP] > 0) {
    drops["cuda_launch_map_full"] = static_cast<int64_t>(n[GW_CUDA_DROP_LAUNCH_MAP]);
  }
  return drops;
}

void CudaSource::Stop() {
  std::vector<std::unique_ptr<AttachedLibrary>> detached;
  {
    std::lock_guard<std::mutex> lock(attach_mu_);
    detached.swap(libraries_);
  }
  detached.clear();  // destroys the links: no probe fires after this
  {
    std::lock_guard<std::mutex> lock(attach_mu_);
    CoverageOff(SessionNs());
  }
  if (started_ && !stopped_) stop_flush_pending_ = true;
  stopped_ = true;
}

int64_t CudaSource::Poll() {
  if (!started_) return 0;
  int drained = ring_buffer__consume(ring_.get());
  FlushEvents();
  int64_t now_sec = context_.clock.ToSession(static_cast<uint64_t>(MonotonicNs())) / 1000000000;
  if (now_sec > current_sec_ || stop_flush_pending_) {
    if (launch_phase_ >= 0) {
      // An open stream capture keeps the launch probes on: its graph's kernels are its launches.
      bool next_on = (LaunchSecond(now_sec) || graphs_.AnyCaptureOpen()) && !stopped_;
      if (!next_on) SetLaunchProbes(false);  // before the flush: nothing counted after it
      // A detached probe can still fire for a moment (the kernel releases a closed link after
      // a grace period): the launches it counts then belong to the counting second before, so
      // every count lands in a counting second.
      FlushCounts(CountingSecondOf(current_sec_), current_sec_);
      if (next_on) SetLaunchProbes(true);
    } else {
      // The cycle starts at the second second in a row with launches: the first is usually
      // cut by the job's start, and the estimate needs a counted second of steady launching.
      bool launched = FlushCounts(current_sec_, current_sec_) > 0;
      launch_seconds_in_a_row_ = launched ? launch_seconds_in_a_row_ + 1 : 0;
      if (options_.launch_duty > 1 && launch_seconds_in_a_row_ >= 2) {
        launch_phase_ = current_sec_;
        if (!LaunchSecond(now_sec)) SetLaunchProbes(false);
      }
    }
    if (stopped_) SetLaunchProbes(false);
    // Kernels run by graph launches (graph_kernels), by the second of each launch.
    if (std::vector<OpCount> graph_counts = graphs_.TakeCounts(); !graph_counts.empty()) {
      context_.sink->OnOpCounts(graph_counts);
    }
    // A second's aggregates are complete once the next second is over (a call is filed under
    // the second it entered in); at the stop, every second.
    FlushCallAggregates(now_sec - 1, stop_flush_pending_);
    if (stop_flush_pending_ && options_.row_budget) {
      std::string summary = BudgetSummary();
      if (!summary.empty()) AddNote(std::move(summary));
    }
    if (stop_flush_pending_ && !runtime_launches_detached_ && nesting_proofs_failed_ > 0) {
      uint64_t runtime = last_failed_window_[GW_CUDA_NEST_RUNTIME];
      AddNote("cuda: the runtime launch probes stayed attached (launches cost two probe hits): "
              "in " + std::to_string(nesting_proofs_failed_.load()) +
              " windows more than 1 in 1,000 runtime launches did not reach a driver launch "
              "(launches that failed in the runtime, or went another way); the last: " +
              std::to_string(runtime - last_failed_window_[GW_CUDA_NEST_PAIRED]) + " of " +
              std::to_string(runtime));
    }
    if (options_.detach_nested_runtime_launches) DetachNestedRuntimeLaunches();
    current_sec_ = now_sec;
    stop_flush_pending_ = false;
    if (++polls_since_gc_ >= 10) {
      polls_since_gc_ = 0;
      ForgetExitedProcesses();
    }
  }
  return drained > 0 ? drained : 0;
}

int CudaSource::OnRecord(void* self, void* data, size_t size) {
  auto* source = static_cast<CudaSource*>(self);
  if (size < 1) return 0;
  uint8_t type = *static_cast<const uint8_t*>(data);
  if (type == GW_CUDA_RECORD_CALL && size >= sizeof(gw_cuda_call_record)) {
    gw_cuda_call_record record;
    std::memcpy(&record, data, sizeof record);
    source->HandleCall(record);
  } else if ((type == GW_CUDA_RECORD_NAME || type == GW_CUDA_RECORD_ALIAS) &&
             size >= sizeof(gw_cuda_name_record)) {
    source->HandleName(*static_cast<const gw_cuda_name_record*>(data));
  }
  return 0;
}

CudaSource::ProcessState& CudaSource::Process(uint32_t tgid) {
  auto& state = processes_[tgid];
  if (!state) state = std::make_unique<ProcessState>();
  return *state;
}

void CudaSource::HandleName(const gw_cuda_name_record& record) {
  ProcessState& process = Process(record.tgid);
  if (record.type == GW_CUDA_RECORD_ALIAS) {
    process.aliases[record.handle] = record.alias_of;
  } else {
    char name[GW_CUDA_NAME_MAX + 1];
    std::memcpy(name, record.name, GW_CUDA_NAME_MAX);
    name[GW_CUDA_NAME_MAX] = '\0';
    if (name[0] == '\0') return;
    process.names[record.handle] = Demangle(name);
    // A driver object whose name is known tells where the driver keeps names.
    if (record.fn >= GW_CUDA_DRIVER_BASE && !driver_names_.confirmed()) {
      driver_names_.Learn(static_cast<int32_t>(record.tgid), record.handle, name);
    }
  }
  process.unnamed.erase(record.handle);
  process.name_ids.erase(record.handle);
}

std::string CudaSource::HostStubName(uint32_t tgid, uint64_t handle) {
  // Only code mapped from a file of bounded size: parsing a 1-2 GB library (libtorch_cuda)
  // would stall this drain thread for seconds and hold its symbol table in memory, and such
  // libraries ship without the stubs' (local) symbols anyway.
  constexpr int64_t kMaxStubFileBytes = 256 << 20;
  ProcessState& process = Process(tgid);
  const MappedRegion* region = process.maps ? process.maps->Find(handle) : nullptr;
  if (region == nullptr) {  // first stub of this process, or a library loaded since
    StatusOr<ProcessMaps> maps = ProcessMaps::Read(static_cast<int32_t>(tgid));
    if (!maps.ok()) return "";
    process.maps = std::move(maps).value();
    region = process.maps->Find(handle);
  }
  if (region == nullptr || !region->executable || region->path.empty() ||
      region->path[0] == '[') {
    return "";
  }
  struct stat st {};
  std::string path = "/proc/" + std::to_string(tgid) + "/root" + region->path;
  if (stat(path.c_str(), &st) != 0 || st.st_size > kMaxStubFileBytes) return "";
  if (!stub_symbols_) stub_symbols_ = std::make_unique<Symbolizer>();
  RawStack raw;
  raw.pid = static_cast<int32_t>(tgid);
  raw.native = {handle};
  std::vector<Frame> frames = stub_symbols_->Symbolize(raw);
  // Only a function's first byte is a stub; anything else (a heap address, the middle of a
  // function) is not a kernel's name.
  if (frames.empty() || frames[0].function.empty() || frames[0].function_offset != 0) return "";
  return frames[0].function;
}

std::string CudaSource::KernelName(uint32_t tgid, uint64_t handle, bool host_stub) {
  ProcessState& process = Process(tgid);
  if (auto it = process.names.find(handle); it != process.names.end()) return it->second;
  if (host_stub) {
    if (auto alias = process.aliases.find(handle); alias != process.aliases.end()) {
      return KernelName(tgid, alias->second, false);
    }
  }
  if (process.unnamed.count(handle)) return "";
  // No record: trace attached after the process loaded its kernels.
  std::string name;
  if (host_stub) {
    // A runtime launch's handle is the kernel's host stub, which nvcc names after the kernel
    // (in binaries that keep symbols); the pairing alias usually arrives first.
    name = HostStubName(tgid, handle);
  } else {
    std::string raw = driver_names_.Read(static_cast<int32_t>(tgid), handle);
    if (!raw.empty()) {
      name = Demangle(raw.c_str());
      process.names[handle] = name;
    }
  }
  if (name.empty()) process.unnamed.insert(handle);
  return name;
}

int64_t CudaSource::KernelNameId(uint32_t tgid, uint64_t handle, bool host_stub) {
  ProcessState& process = Process(tgid);
  if (auto it = process.name_ids.find(handle); it != process.name_ids.end()) return it->second;
  std::string name = KernelName(tgid, handle, host_stub);
  bool known = !name.empty();
  if (!known) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "fn@0x%" PRIx64, handle);
    name = buf;
  }
  int64_t id = context_.sink->InternString(name);
  // Unknown names are not cached: a name record or pairing may still arrive for the handle.
  if (known) process.name_ids[handle] = id;
  return id;
}

bool CudaSource::LaunchProbesOnThroughout(int64_t from_ns, int64_t to_ns) const {
  std::lock_guard<std::mutex> lock(attach_mu_);
  for (const auto& [off, on] : launch_gaps_) {
    if (off <= to_ns && on >= from_ns) return false;
  }
  return true;
}

void CudaSource::TrackGraphs(const gw_cuda_call_record& r, Event* e) {
  auto pid = static_cast<int32_t>(r.tgid);
  auto tid = static_cast<int32_t>(r.tid);
  switch (r.fn) {
    case GW_FN_CUDA_STREAM_BEGIN_CAPTURE:
    case GW_FN_CU_STREAM_BEGIN_CAPTURE:
      if (r.ret == 0) graphs_.CaptureBegin(pid, tid, e->ts_ns);
      break;
    case GW_FN_CUDA_STREAM_END_CAPTURE:
    case GW_FN_CU_STREAM_END_CAPTURE: {
      int64_t since = graphs_.OpenCaptureSince(pid, tid);
      bool complete =
          since >= 0 && LaunchProbesOnThroughout(since, e->ts_ns + e->duration_ns);
      graphs_.CaptureEnd(pid, tid, r.ret == 0 ? r.dst : 0, complete);
      break;
    }
    case GW_FN_CUDA_GRAPH_INSTANTIATE:
    case GW_FN_CUDA_GRAPH_INSTANTIATE_WITH_FLAGS:
    case GW_FN_CU_GRAPH_INSTANTIATE:
      if (r.ret == 0) graphs_.Instantiate(pid, r.src, r.dst);
      break;
    case GW_FN_CUDA_GRAPH_LAUNCH:
    case GW_FN_CUDA_GRAPH_LAUNCH_PTSZ:
    case GW_FN_CU_GRAPH_LAUNCH:
    case GW_FN_CU_GRAPH_LAUNCH_PTSZ:
      if (r.ret == 0) e->name_id = graphs_.Launch(pid, r.dst, e->ts_ns / 1'000'000'000);
      break;
    default:
      if (e->op == Op::kGraphNode) graphs_.CapturedLaunch(pid, tid, r.dst, r.fn < GW_CUDA_DRIVER_BASE);
      break;
  }
}

void CudaSource::HandleCall(const gw_cuda_call_record& r) {
  std::optional<Event> e = DecodeCudaCall(
      r, context_.clock, Process(r.tgid).memory,
      [this](uint32_t tgid, uint64_t handle, bool host_stub) {
        return KernelNameId(tgid, handle, host_stub);
      },
      [this](const std::string& text) { return context_.sink->InternString(text); });
  if (!e) return;
  TrackGraphs(r, &*e);
  batch_.push_back(*e);
  if (batch_.size() >= 4096) FlushEvents();
}

void CudaSource::FlushEvents() {
  if (batch_.empty()) return;
  context_.sink->OnEvents(batch_.data(), batch_.size());
  batch_.clear();
}

int64_t CudaSource::FlushCounts(int64_t launch_sec, int64_t call_sec) {
  bpf_map* map = skel_.get()->maps.launch_counts;
  int fd = bpf_map__fd(map);
  std::map<std::tuple<int32_t, Op, int64_t>, int64_t> deltas;
  gw_cuda_launch_key key{};
  gw_cuda_launch_key next{};
  gw_cuda_launch_key* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    key = next;
    prev = &key;
    gw_cuda_launch_count value{};
    if (bpf_map_lookup_elem(fd, &key, &value) != 0) continue;
    auto id = std::make_tuple(key.tgid, key.fn, key.handle);
    uint64_t& last = last_launch_counts_[id];
    if (value.count <= last) continue;
    int64_t delta = static_cast<int64_t>(value.count - last);
    last = value.count;
    const ProbeSpec* spec = SpecOf(key.fn);
    if (spec == nullptr || !spec->op.has_value()) continue;
    int64_t name_id = spec->probe == ProbeClass::kLaunch
                          ? KernelNameId(key.tgid, key.handle, key.fn < GW_CUDA_DRIVER_BASE)
                          : kNull;
    deltas[{static_cast<int32_t>(key.tgid), *spec->op, name_id}] += delta;
  }
  std::vector<OpCount> counts;
  std::map<int64_t, int64_t> covered;
  {
    // Launches counted after the probes were detached extend the coverage to the last one.
    int64_t last_launch = -1;
    std::vector<uint64_t> per_cpu;
    if (PerCpuValues(skel_.get()->maps.launch_last_ns, 0, &per_cpu) && !per_cpu.empty()) {
      uint64_t newest = *std::max_element(per_cpu.begin(), per_cpu.end());
      if (newest > 0) last_launch = context_.clock.ToSession(newest);
    }
    std::lock_guard<std::mutex> lock(attach_mu_);
    if (covered_on_since_ns_ < 0 && covered_off_ns_ >= 0 && last_launch > covered_off_ns_) {
      int64_t off = covered_off_ns_;
      CoverageOn(off);
      CoverageOff(last_launch);
    }
    covered = TakeCoverage(SessionNs());
  }
  int64_t covered_total = 0;
  for (const auto& [sec, ns] : covered) {
    // What launch counts were counted over, by second: readers scale by it.
    OpCount c;
    c.sec = sec;
    c.pid = 0;
    c.op = Op::kLaunchCoverage;
    c.count = 1;
    c.total_ns = ns;
    counts.push_back(c);
    covered_total += ns;
  }
  int64_t launches = 0;
  for (const auto& [k, n] : deltas) {
    OpCount c;
    bool launch = IsLaunch(std::get<1>(k));
    c.pid = std::get<0>(k);
    c.op = std::get<1>(k);
    c.name_id = std::get<2>(k);
    if (launch) launches += n;
    if (!launch || covered_total <= 0) {
      // Counted calls (always probed) to the second that just ended; launches counted after
      // a detach (a closed link fires for a moment) to their counting second.
      c.sec = launch ? launch_sec : call_sec;
      c.count = n;
      counts.push_back(c);
      continue;
    }
    // Launches have no timestamps: they are spread over the seconds the probes covered since
    // the last flush, in proportion (largest remainders keep the sum exact).
    int64_t given = 0;
    std::vector<std::pair<double, size_t>> remainders;
    size_t first = counts.size();
    for (const auto& [sec, ns] : covered) {
      double share = static_cast<double>(n) * static_cast<double>(ns) / covered_total;
      c.sec = sec;
      c.count = static_cast<int64_t>(share);
      given += c.count;
      remainders.push_back({share - static_cast<double>(c.count), counts.size()});
      counts.push_back(c);
    }
    std::sort(remainders.begin(), remainders.end(), std::greater<>());
    for (size_t i = 0; given < n && i < remainders.size(); ++i, ++given) {
      ++counts[remainders[i].second].count;
    }
    counts.erase(std::remove_if(counts.begin() + static_cast<std::ptrdiff_t>(first), counts.end(),
                                [](const OpCount& x) { return x.count == 0; }),
                 counts.end());
  }
  if (counts.empty()) return 0;
  context_.sink->OnOpCounts(counts);
  return launches;
}

void CudaSource::FlushCallAggregates(int64_t before_sec, bool all) {
  int fd = bpf_map__fd(skel_.get()->maps.call_aggs);
  std::vector<gw_cuda_agg_key> done;
  gw_cuda_agg_key key{};
  gw_cuda_agg_key next{};
  gw_cuda_agg_key* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    key = next;
    prev = &key;
    if (all || static_cast<int64_t>(key.sec) < before_sec) done.push_back(key);
  }
  if (done.empty()) return;
  std::vector<OpCount> counts;
  counts.reserve(done.size());
  for (const gw_cuda_agg_key& k : done) {
    gw_cuda_agg_value value{};
    if (bpf_map_lookup_elem(fd, &k, &value) != 0) continue;
    bpf_map_delete_elem(fd, &k);
    const ProbeSpec* spec = SpecOf(k.fn);
    if (spec == nullptr || !spec->op.has_value() || value.count == 0) continue;
    OpCount c;
    c.sec = static_cast<int64_t>(k.sec);
    c.pid = static_cast<int32_t>(k.tgid);
    c.op = *spec->op;
    c.count = static_cast<int64_t>(value.count);
    c.total_ns = static_cast<int64_t>(value.total_ns);
    c.max_ns = static_cast<int64_t>(value.max_ns);
    c.bytes = static_cast<int64_t>(value.bytes);
    // A copy's direction names its aggregate (op_seconds.name_id), as a kernel names a launch.
    if (k.copy_kind != 0) {
      c.name_id = context_.sink->InternString(CopyKindName(k.copy_kind - 1));
    }
    for (size_t i = 0; i < GW_CUDA_HIST_BUCKETS; ++i) {
      c.log2_hist[i] = static_cast<int64_t>(value.hist[i]);
    }
    counts.push_back(c);
  }
  if (!counts.empty()) context_.sink->OnOpCounts(counts);
}

std::string CudaSource::BudgetSummary() const {
  uint64_t n[GW_CUDA_BUDGET_SLOTS] = {};
  if (!SumPerCpuSlots(skel_.get()->maps.call_budget, GW_CUDA_BUDGET_SLOTS, n)) return "";
  uint64_t rows = n[GW_CUDA_BUDGET_ROW_SLOW] + n[GW_CUDA_BUDGET_ROW_OUTLIER] +
                  n[GW_CUDA_BUDGET_ROW_SAMPLED] + n[GW_CUDA_BUDGET_AGG_FULL];
  if (rows + n[GW_CUDA_BUDGET_AGGREGATED] + n[GW_CUDA_BUDGET_NESTED] == 0) return "";
  auto num = [](uint64_t v) { return std::to_string(v); };
  std::string out = "cuda row budget: " + num(n[GW_CUDA_BUDGET_AGGREGATED]) +
                    " short calls aggregated (op_seconds, op_latency), " + num(rows) +
                    " kept as rows (" + num(n[GW_CUDA_BUDGET_ROW_SLOW]) + " slow or failed, " +
                    num(n[GW_CUDA_BUDGET_ROW_OUTLIER]) + " outliers, " +
                    num(n[GW_CUDA_BUDGET_ROW_SAMPLED]) + " sampled";
  if (n[GW_CUDA_BUDGET_AGG_FULL] > 0) {
    out += ", " + num(n[GW_CUDA_BUDGET_AGG_FULL]) + " because the aggregate map was full";
  }
  out += ")";
  if (n[GW_CUDA_BUDGET_OVER_BUDGET] > 0) {
    out += "; " + num(n[GW_CUDA_BUDGET_OVER_BUDGET]) +
           " outliers or samples over a thread's row budget were aggregated";
  }
  out += "; " + num(n[GW_CUDA_BUDGET_NESTED]) +
         " driver calls made inside runtime calls were not recorded again";
  return out;
}

void CudaSource::ForgetExitedProcesses() {
  auto gone = [](uint32_t tgid) {
    return kill(static_cast<pid_t>(tgid), 0) != 0 && errno == ESRCH;
  };
  for (auto it = processes_.begin(); it != processes_.end();) {
    if (!gone(it->first)) {
      ++it;
      continue;
    }
    if (stub_symbols_) stub_symbols_->ForgetProcess(static_cast<int32_t>(it->first));
    graphs_.Forget(static_cast<int32_t>(it->first));
    it = processes_.erase(it);
  }
  // Launch counters of exited processes were flushed just before: delete them in the kernel.
  int fd = bpf_map__fd(skel_.get()->maps.launch_counts);
  for (auto it = last_launch_counts_.begin(); it != last_launch_counts_.end();) {
    uint32_t tgid = std::get<0>(it->first);
    if (!gone(tgid)) {
      ++it;
      continue;
    }
    gw_cuda_launch_key key{};
    key.tgid = tgid;
    key.fn = std::get<1>(it->first);
    key.handle = std::get<2>(it->first);
    bpf_map_delete_elem(fd, &key);
    it = last_launch_counts_.erase(it);
  }
}

}  // namespace gw
