// gw_ring_inject: writes synthetic CUDA call records into a running `gpuwhy trace`'s own CUDA
// ring buffer at a controlled rate (issue 7, item 2: the capacity of ring buffer → decoder →
// store, without uprobes in front of it). See ring_inject.bpf.c.
//
// Finds gpuwhy's `gw_cuda_exit` program among the file descriptors of --pid, takes the ring
// buffer and the drop counters that program writes, and loads a BPF program sharing both. Then
// every millisecond it runs that program (BPF_PROG_TEST_RUN) as many times as needed to stay
// on --rate records per second, each run emitting up to --batch records with bpf_loop. The
// records are driver stream syncs (`cuStreamSync` rows) of this process. A record that finds
// the ring full is lost and counted in gpuwhy's `cuda_bpf_reserve` drops, as with real probes.
//
// Prints one line:
//   gw_ring_inject: pid=P target_rate=R seconds=S emitted=E reserve_failed=F rate=X cpu_s=U
//
// Usage: sudo gw_ring_inject --pid GPUWHY_PID --rate R [--seconds S] [--batch B]
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ring_inject.skel.h"

namespace {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

double ProcessCpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// The BPF program ids among the open file descriptors of `pid` (/proc/PID/fdinfo "prog_id:").
std::vector<uint32_t> ProgramIdsOf(int pid) {
  std::vector<uint32_t> ids;
  std::string dir = "/proc/" + std::to_string(pid) + "/fdinfo";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return ids;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(dir + "/" + e->d_name);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("prog_id:", 0) == 0) ids.push_back(std::strtoul(line.c_str() + 8, nullptr, 10));
    }
  }
  closedir(d);
  return ids;
}

struct GpuwhyMaps {
  int ring_fd = -1;
  int drops_fd = -1;
};

// gpuwhy's CUDA ring buffer and drop counters: the maps its `gw_cuda_exit` program uses.
bool FindCudaMaps(int pid, GpuwhyMaps* out) {
  for (uint32_t prog_id : ProgramIdsOf(pid)) {
    int prog_fd = bpf_prog_get_fd_by_id(prog_id);
    if (prog_fd < 0) continue;
    bpf_prog_info info{};
    uint32_t map_ids[64] = {};
    info.nr_map_ids = 64;
    info.map_ids = reinterpret_cast<uint64_t>(map_ids);
    uint32_t len = sizeof info;
    bool match = bpf_obj_get_info_by_fd(prog_fd, &info, &len) == 0 &&
                 std::strcmp(info.name, "gw_cuda_exit") == 0;
    uint32_t nr_maps = info.nr_map_ids < 64 ? info.nr_map_ids : 64;
    close(prog_fd);
    if (!match) continue;
    for (uint32_t i = 0; i < nr_maps; ++i) {
      int map_fd = bpf_map_get_fd_by_id(map_ids[i]);
      if (map_fd < 0) continue;
      bpf_map_info minfo{};
      uint32_t mlen = sizeof minfo;
      if (bpf_obj_get_info_by_fd(map_fd, &minfo, &mlen) != 0) {
        close(map_fd);
        continue;
      }
      if (minfo.type == BPF_MAP_TYPE_RINGBUF && out->ring_fd < 0) {
        out->ring_fd = map_fd;
      } else if (minfo.type == BPF_MAP_TYPE_PERCPU_ARRAY && std::strcmp(minfo.name, "drops") == 0 &&
                 out->drops_fd < 0) {
        out->drops_fd = map_fd;
      } else {
        close(map_fd);
      }
    }
    return out->ring_fd >= 0 && out->drops_fd >= 0;
  }
  return false;
}

void Usage() {
  std::fprintf(stderr,
               "usage: gw_ring_inject --pid GPUWHY_PID --rate RECORDS_PER_S [--seconds S] "
               "[--batch B]\n");
}

}  // namespace

int main(int argc, char** argv) {
  int pid = 0;
  double rate = 0;
  double seconds = 5;
  int batch = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--pid") pid = std::atoi(argv[i + 1]);
    else if (a == "--rate") rate = std::atof(argv[i + 1]);
    else if (a == "--seconds") seconds = std::atof(argv[i + 1]);
    else if (a == "--batch") batch = std::atoi(argv[i + 1]);
    else {
      Usage();
      return 2;
    }
  }
  if (pid <= 0 || rate <= 0 || seconds <= 0 || batch < 1) {
    Usage();
    return 2;
  }
  libbpf_set_print(nullptr);
  GpuwhyMaps maps;
  if (!FindCudaMaps(pid, &maps)) {
    std::fprintf(stderr,
                 "gw_ring_inject: no gw_cuda_exit program with a ring buffer and drops map in "
                 "pid %d — hint: is it `gpuwhy trace` with the CUDA source attached, and are "
                 "we root?\n",
                 pid);
    return 1;
  }
  ring_inject_bpf* skel = ring_inject_bpf__open();
  if (skel == nullptr) {
    std::fprintf(stderr, "gw_ring_inject: open BPF object failed\n");
    return 1;
  }
  skel->rodata->target_tgid = static_cast<uint32_t>(getpid());
  skel->rodata->target_tid = static_cast<uint32_t>(syscall(SYS_gettid));
  if (bpf_map__reuse_fd(skel->maps.events, maps.ring_fd) != 0 ||
      bpf_map__reuse_fd(skel->maps.drops, maps.drops_fd) != 0 ||
      ring_inject_bpf__load(skel) != 0) {
    std::fprintf(stderr, "gw_ring_inject: load with gpuwhy's maps failed: %s\n",
                 std::strerror(errno));
    ring_inject_bpf__destroy(skel);
    return 1;
  }
  int prog_fd = bpf_program__fd(skel->progs.gw_ring_inject);

  double cpu_start = ProcessCpuSeconds();
  int64_t start_ns = NowNs();
  const int64_t end_ns = start_ns + static_cast<int64_t>(seconds * 1e9);
  int64_t requested = 0;
  int64_t tick = start_ns;
  int errors = 0;
  while (true) {
    int64_t now = NowNs();
    if (now >= end_ns) break;
    int64_t due = static_cast<int64_t>(rate * static_cast<double>(now - start_ns) / 1e9) -
                  requested;
    while (due > 0) {
      int n = due < batch ? static_cast<int>(due) : batch;
      skel->bss->batch = static_cast<uint32_t>(n);
      LIBBPF_OPTS(bpf_test_run_opts, opts);
      if (bpf_prog_test_run_opts(prog_fd, &opts) != 0 && errors++ == 0) {
        std::fprintf(stderr, "gw_ring_inject: test run: %s\n", std::strerror(errno));
      }
      requested += n;
      due -= n;
    }
    tick += 1000000;
    if (tick > NowNs()) {
      timespec ts{static_cast<time_t>(tick / 1000000000), static_cast<long>(tick % 1000000000)};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
    }
  }
  double elapsed = static_cast<double>(NowNs() - start_ns) / 1e9;
  double cpu = ProcessCpuSeconds() - cpu_start;
  uint64_t emitted = skel->bss->emitted;
  uint64_t failed = skel->bss->reserve_failed;
  std::printf(
      "gw_ring_inject: pid=%d target_rate=%.0f seconds=%.3f emitted=%llu reserve_failed=%llu "
      "rate=%.0f cpu_s=%.3f\n",
      getpid(), rate, elapsed, static_cast<unsigned long long>(emitted),
      static_cast<unsigned long long>(failed), static_cast<double>(emitted) / elapsed, cpu);
  ring_inject_bpf__destroy(skel);
  return errors == 0 ? 0 : 1;
}
