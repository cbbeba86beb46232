// gw_bare_probes: attaches empty uprobe+uretprobe pairs to the named functions of a library
// (by file offset, like gpuwhy) and holds them until SIGINT/SIGTERM or --duration. The floor
// for gpuwhy's probe overhead: whatever gpuwhy costs above this is gpuwhy's own work.
//
// Usage: gw_bare_probes [--count] [--pid P] --lib PATH --symbols a,b,c [--lib PATH --symbols ...]
//                       [--duration S]
//        gw_bare_probes --sched [--duration S]
// --sched attaches empty programs to the scheduler and interrupt tracepoints gpuwhy's host
// source uses for wake-up causality (sched_switch, sched_waking, irq/softirq/hrtimer entry and
// exit) instead: the floor for host_probe_cost.py.
// --count attaches an entry-only counter per symbol instead of the empty pair, and at the end
// prints {"lib:symbol": calls, ...} as one JSON line on stdout: an independent tally of calls
// (bench/gpu/graph_counts.py checks gpuwhy's launch counts against it).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "bare_probes.skel.h"
#include "discover/elf_symbols.h"

namespace {

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> targets;  // lib, comma list
  double duration = 0;
  bool sched = false;
  bool count = false;
  int pid = -1;  // --pid: attach to one process only
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--sched" || a == "--count") {
      (a == "--sched" ? sched : count) = true;
      --i;  // takes no value
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "gw_bare_probes: %s needs a value\n", a.c_str());
      return 2;
    }
    if (a == "--lib") targets.push_back({argv[i + 1], ""});
    else if (a == "--symbols" && !targets.empty()) targets.back().second = argv[i + 1];
    else if (a == "--duration") duration = std::atof(argv[i + 1]);
    else if (a == "--pid") pid = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: gw_bare_probes --lib PATH --symbols a,b [--duration S]\n");
      return 2;
    }
  }
  if (targets.empty() == !sched) {
    std::fprintf(stderr,
                 "usage: gw_bare_probes [--count] [--pid P] --lib PATH --symbols a,b [--duration S]\n"
                 "       gw_bare_probes --sched [--duration S]\n");
    return 2;
  }
  bare_probes_bpf* skel = bare_probes_bpf__open_and_load();
  if (skel == nullptr) {
    std::fprintf(stderr, "gw_bare_probes: load failed (root needed)\n");
    return 1;
  }
  std::vector<bpf_link*> links;
  std::vector<std::string> slots;  // --count: the cookie's symbol
  int attached = 0;
  for (const auto& [lib, list] : targets) {
    auto table = gw::ElfSymbolTable::Load(lib);
    if (!table.ok()) {
      std::fprintf(stderr, "gw_bare_probes: %s\n", table.status().message().c_str());
      return 1;
    }
    std::stringstream names(list);
    std::string name;
    while (std::getline(names, name, ',')) {
      const gw::ElfSymbol* sym = table->Find(name);
      if (sym == nullptr) {
        std::fprintf(stderr, "gw_bare_probes: %s not in %s (skipped)\n", name.c_str(), lib.c_str());
        continue;
      }
      uint64_t off = gw::ElfSymbolTable::ProbeOffset(*sym);
      if (count) {
        if (slots.size() >= 64) {
          std::fprintf(stderr, "gw_bare_probes: --count takes at most 64 symbols\n");
          return 2;
        }
        LIBBPF_OPTS(bpf_uprobe_opts, count_opts, .bpf_cookie = slots.size());
        bpf_link* c = bpf_program__attach_uprobe_opts(skel->progs.gw_count_entry, pid, lib.c_str(),
                                                      off, &count_opts);
        if (c == nullptr) {
          std::fprintf(stderr, "gw_bare_probes: attach %s failed\n", name.c_str());
          continue;
        }
        links.push_back(c);
        std::string base = lib.substr(lib.rfind('/') + 1);
        slots.push_back(base + ":" + name);
        ++attached;
        continue;
      }
      LIBBPF_OPTS(bpf_uprobe_opts, entry_opts, .retprobe = false);
      LIBBPF_OPTS(bpf_uprobe_opts, ret_opts, .retprobe = true);
      bpf_link* e = bpf_program__attach_uprobe_opts(skel->progs.gw_bare_entry, pid, lib.c_str(),
                                                    off, &entry_opts);
      bpf_link* r = bpf_program__attach_uprobe_opts(skel->progs.gw_bare_return, pid, lib.c_str(),
                                                    off, &ret_opts);
      if (e == nullptr || r == nullptr) {
        std::fprintf(stderr, "gw_bare_probes: attach %s failed\n", name.c_str());
        continue;
      }
      links.push_back(e);
      links.push_back(r);
      ++attached;
    }
  }
  if (sched) {
    for (bpf_program* prog :
         {skel->progs.gw_bare_switch, skel->progs.gw_bare_waking, skel->progs.gw_bare_irq_entry,
          skel->progs.gw_bare_irq_exit, skel->progs.gw_bare_softirq_entry,
          skel->progs.gw_bare_softirq_exit, skel->progs.gw_bare_hrtimer_entry,
          skel->progs.gw_bare_hrtimer_exit}) {
      bpf_link* l = bpf_program__attach(prog);
      if (l == nullptr) {
        std::fprintf(stderr, "gw_bare_probes: attach %s failed\n", bpf_program__name(prog));
        return 1;
      }
      links.push_back(l);
    }
    std::fprintf(stderr, "gw_bare_probes: %zu scheduler/interrupt tracepoints attached\n",
                 links.size());
  } else {
    std::fprintf(stderr, "gw_bare_probes: %d pairs attached\n", attached);
  }
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  double waited = 0;
  while (!g_stop && (duration <= 0 || waited < duration)) {
    usleep(100000);
    waited += 0.1;
  }
  for (bpf_link* l : links) bpf_link__destroy(l);
  if (count) {
    int fd = bpf_map__fd(skel->maps.call_counts);
    std::printf("{");
    for (uint32_t i = 0; i < slots.size(); ++i) {
      uint64_t n = 0;
      if (bpf_map_lookup_elem(fd, &i, &n) != 0) n = 0;
      std::printf("%s\"%s\": %llu", i ? ", " : "", slots[i].c_str(),
                  static_cast<unsigned long long>(n));
    }
    std::printf("}\n");
  }
  bare_probes_bpf__destroy(skel);
  return 0;
}
