// Text and JSON renderings of a Report. Text follows the brief's shape; JSON carries everything
// the text shows, as structured data.
#include <cmath>
#include <nlohmann/json.hpp>

#include "analysis/callers.h"
#include "analysis/explain.h"
#include "analysis/format.h"
#include "base/table.h"
#include "base/text.h"

namespace gw {

namespace {

constexpr const char* kRule =
    "━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━";

// Rounds for stable, readable JSON (3 decimals).
double R(double v) { return std::round(v * 1000.0) / 1000.0; }

void AppendLines(std::string* out, const char* head, const std::vector<std::string>& lines) {
  for (size_t i = 0; i < lines.size(); ++i) {
    *out += Fmt("  %-14s%s\n", i == 0 ? head : "", lines[i].c_str());
  }
}

std::string Indent(const std::string& text, const std::string& prefix) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    out += prefix + text.substr(start, nl - start) + "\n";
    start = nl + 1;
  }
  return out;
}

nlohmann::ordered_json Pct(double v) {
  return v < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(R(v));
}

std::string Ms(double ms) { return FormatNs(static_cast<int64_t>(ms * 1e6)); }

void AppendSiteDetail(std::string* out, const CallSite& s) {
  if (!s.source_line.empty()) *out += "      ↳ " + s.source_line + "\n";
  if (!s.via.empty()) *out += "      via " + s.via + "\n";
}

// "Top cudaStreamSync callers" and "Top sched_switch victims" (trace --stack).
void AppendCallerSections(std::string* out, const Report& r) {
  for (const CallerSection& c : r.callers) {
    *out += Fmt("Top %s callers (%s, %s calls with stacks):\n", c.op.c_str(),
                r.window.label.c_str(), FormatCount(c.with_stacks).c_str());
    for (const CallSite& s : c.sites) {
      *out += Fmt("  %s → %s | %s calls | avg %s | max %s | %s\n", SiteName(s).c_str(),
                  c.op.c_str(), FormatCount(s.count).c_str(), Ms(s.avg_ms).c_str(),
                  Ms(s.max_ms).c_str(), s.processes.c_str());
      AppendSiteDetail(out, s);
    }
    *out += "\n";
  }
  const CallerSection& v = r.sched_victims;
  if (!v.sites.empty()) {
    *out += Fmt("Top sched_switch victims (%s, %s sampled switches off the CPU):\n",
                r.window.label.c_str(), FormatCount(v.with_stacks).c_str());
    for (const CallSite& s : v.sites) {
      *out += Fmt("  %s → %s | preempted %s times, blocked %s times | off-CPU avg %s | max %s\n",
                  SiteName(s).c_str(), s.processes.c_str(), FormatCount(s.preempted).c_str(),
                  FormatCount(s.blocked).c_str(), Ms(s.avg_ms).c_str(), Ms(s.max_ms).c_str());
      AppendSiteDetail(out, s);
    }
    *out += "\n";
  }
}

// "Where the CPU time of the main thread went" (the on-CPU profile).
void AppendCpuProfiles(std::string* out, const Report& r) {
  for (const CpuProfileSection& p : r.cpu_profiles) {
    *out += Fmt("Where the CPU time of %s went (%s: %s s on the CPU, %s samples at %lld Hz",
                p.title.c_str(), r.window.label.c_str(), FormatSeconds(p.cpu_s).c_str(),
                FormatCount(p.samples).c_str(), static_cast<long long>(p.profile_hz));
    if (p.kernel_samples > 0) {
      *out += Fmt(", %.0f%% in the kernel",
                  100.0 * static_cast<double>(p.kernel_samples) / static_cast<double>(p.samples));
    }
    if (p.sync_samples > 0) {
      *out += Fmt(", %.0f%% spinning inside CUDA syncs while the GPU worked (a wait, not listed)",
                  100.0 * static_cast<double>(p.sync_samples) / static_cast<double>(p.samples));
    }
    *out += "):\n";
    for (const CallSite& s : p.sites) {
      *out += Fmt("  %3.0f%%  %s | %s s\n",
                  100.0 * static_cast<double>(s.count) / static_cast<double>(p.samples),
                  SiteName(s).c_str(), FormatSeconds(s.total_ms / 1e3).c_str());
      AppendSiteDetail(out, s);
    }
    *out += "\n";
  }
}

nlohmann::ordered_json SectionJson(const CallerSection& c) {
  nlohmann::ordered_json sites = nlohmann::ordered_json::array();
  for (const CallSite& s : c.sites) {
    sites.push_back({{"location", s.location},
                     {"file", s.file},
                     {"line", s.line},
                     {"function", s.function},
                     {"via", s.via},
                     {"source_line", s.source_line},
                     {"processes", s.processes},
                     {"count", s.count},
                     {"total_ms", R(s.total_ms)},
                     {"avg_ms", R(s.avg_ms)},
                     {"max_ms", R(s.max_ms)},
                     {"preempted", s.preempted},
                     {"blocked", s.blocked}});
  }
  return {{"op", c.op}, {"with_stacks", c.with_stacks}, {"sites", sites}};
}

std::string Title(const Finding& f) { return FindingTitle(f); }

}  // namespace

// "GPU 0 (H200): nvidia-smi util 83% | SM active 71% | occupancy 17% | 1980 MHz | 451 W".
std::string GpuLine(const GpuSummary& g) {
  std::string name = g.name;
  if (name.rfind("NVIDIA ", 0) == 0) name = name.substr(7);
  std::string out = Fmt("GPU %d", g.gpu) + (name.empty() ? "" : " (" + name + ")") + ":";
  std::string sep = " ";
  auto add = [&](const std::string& part) {
    out += sep + part;
    sep = " | ";
  };
  if (g.util_pct >= 0) add(Fmt("nvidia-smi util %.0f%%", g.util_pct));
  if (g.sm_active_pct >= 0) add(Fmt("SM active %.0f%%", g.sm_active_pct));
  if (g.sm_occupancy_pct >= 0) add(Fmt("occupancy %.0f%%", g.sm_occupancy_pct));
  if (g.tensor_active_pct >= 0) add(Fmt("tensor %.0f%%", g.tensor_active_pct));
  if (g.dram_bw_pct >= 0) add(Fmt("DRAM bw %.0f%%", g.dram_bw_pct));
  if (g.sm_clock_mhz >= 0) add(Fmt("%.0f MHz", g.sm_clock_mhz));
  if (g.power_w >= 0) add(Fmt("%.0f W", g.power_w));
  if (!g.gpm) add("no GPM");
  return out + Fmt(" (median of %lld samples)", static_cast<long long>(g.samples));
}

std::string FindingTitle(const Finding& f) { return f.cause + " → " + f.effect; }

namespace {

std::string Span(int64_t from_ns, int64_t to_ns) {
  return Fmt("%.1f s – %.1f s", static_cast<double>(from_ns) / 1e9,
             static_cast<double>(to_ns) / 1e9);
}

// The long-window header: how the window was answered and what its rollups say.
std::string LongWindowText(const LongWindowSummary& l) {
  auto pct = [&](double s) { return l.active_s > 0 ? 100.0 * s / l.active_s : 0.0; };
  std::string out =
      Fmt("Long window (%s, %s): %s raw rows, too many to read; answered from "
          "the per-thread rollups%s.\n",
          l.label.c_str(), Span(l.from_ns, l.to_ns).c_str(), FormatCount(l.estimated_rows).c_str(),
          l.has_incident ? ", with raw rows for the incident only" : " only");
  if (!l.has_raw) {
    out +=
        "  Raw rows:      none left for this session (pruned under --max-db; its rollups are "
        "kept)\n";
  } else if (l.raw_first_ts > l.from_ns) {
    out +=
        Fmt("  Raw rows:      kept from %.1f s (older ones pruned under --max-db; their "
            "rollups are kept)\n",
            static_cast<double>(l.raw_first_ts) / 1e9);
  }
  if (l.buckets == 0) {
    out += l.main_pid == 0 ? "  No CUDA process in this window's rollups"
                           : "  No CUDA calls of " + l.main_label + " in this window's rollups";
    return out + (l.has_incident ? Fmt("; the causal chains are from the latest stretch with "
                                       "raw rows, %s.\n\n",
                                       Span(l.incident_from_ns, l.incident_to_ns).c_str())
                                 : ".\n\n");
  }
  if (l.has_incident) {
    out += Fmt(
        "  Incident:      %s — where the main thread lost the most time: %.1f s "
        "(%.1f s in a typical stretch as long)\n",
        Span(l.incident_from_ns, l.incident_to_ns).c_str(), l.incident_lost_s, l.typical_lost_s);
  }
  out += Fmt(
      "  Main thread:   %s, %.0f s active: %.1f%% waiting for a CPU, %.1f%% in I/O, "
      "%.1f%% in page faults, %.1f%% asleep otherwise, %.1f%% in CUDA syncs; %s "
      "context switches\n",
      l.main_label.c_str(), l.active_s, pct(l.runq_s), pct(l.io_s), pct(l.fault_s),
      pct(std::max(0.0, l.blocked_s - l.sync_s)), pct(l.sync_s), FormatCount(l.switches).c_str());
  out +=
      Fmt("  CUDA calls/s:  median %s over the window%s; %lld of %lld 10 s stretches below "
          "half of it (launches not counted)\n",
          FormatCount(static_cast<int64_t>(l.calls_per_s_median)).c_str(),
          l.has_incident ? Fmt(", %s in the incident",
                               FormatCount(static_cast<int64_t>(l.calls_per_s_incident)).c_str())
                               .c_str()
                         : "",
          static_cast<long long>(l.low_buckets), static_cast<long long>(l.buckets));
  out +=
      Fmt("  Other tracked: %.1f s waiting for a CPU, %.1f s in I/O, %.1f s in page "
          "faults, %s context switches\n\n",
          l.others_runq_s, l.others_io_s, l.others_fault_s, FormatCount(l.others_switches).c_str());
  return out;
}

// "GPU time (this job's window)": busy for the job, for others, idle, and the idle seconds by
// the host cause that held the critical path, with the not-attributed rest. A busy GPU is called
// GPU-bound only when no finding of MEDIUM or more says what would speed the job up.
std::string BudgetText(const GpuBudget& b, bool worth_fixing) {
  if (!b.present || b.window_s <= 0) return "";
  auto pct = [&](double s) { return FormatPct(s / b.window_s); };
  std::string source = b.source == "nvml-process" ? Fmt("NVML, GPU %d, split by process", b.gpu)
                       : b.source == "nvml"       ? Fmt("NVML, GPU %d", b.gpu)
                                                  : std::string("the job's syncs; no GPU samples");
  std::string out = Fmt("GPU time over %.1f s (%s): busy for this job %.1f s (%s)", b.window_s,
                        source.c_str(), b.gpu_busy_job_s, pct(b.gpu_busy_job_s).c_str());
  if (b.gpu_busy_other_s > 0.05) {
    out += Fmt(", busy for other processes %.1f s (%s)", b.gpu_busy_other_s,
               pct(b.gpu_busy_other_s).c_str());
  }
  out += Fmt(", idle %.1f s (%s)\n", b.gpu_idle_s, pct(b.gpu_idle_s).c_str());
  // The lifetime outside the loop, said once: its GPU idle time is no cause's lost time.
  std::string outside;
  if (b.startup_s >= 0.05) {
    outside = Fmt("%.1f s of start-up before the job's first CUDA call", b.startup_s);
  }
  if (b.exit_s >= 0.05) {
    outside += Fmt("%s%.1f s of exit after its last", outside.empty() ? "" : ", ", b.exit_s);
  }
  if (!outside.empty()) {
    out += "  outside the loop, not in the budget: " + outside + "\n";
  }
  Table t;
  t.columns = {"what held the job", "critical path s", "GPU lost s"};
  for (const BudgetLine& line : b.lines) {
    if (line.path_s < 0.05 && line.lost_s < 0.05) continue;
    t.rows.push_back(
        {BudgetCauseLabel(line.cause), Fmt("%.1f", line.path_s), Fmt("%.1f", line.lost_s)});
  }
  t.rows.push_back(
      {"GPU idle with no host cause on the path", "-", Fmt("%.1f", b.idle_unattributed_s)});
  out += Indent(FormatTable(t, TableFormat::kText), "  ");
  if (b.gpu_bound && !worth_fixing) {
    out += Fmt("  → GPU-bound: the job kept its GPU busy %s of the window\n",
               pct(b.gpu_busy_job_s).c_str());
  } else if (b.gpu_bound) {
    out += Fmt("  → the job kept its GPU busy %s of the window; the findings below still cost it "
               "time\n",
               pct(b.gpu_busy_job_s).c_str());
  }
  return out + "\n";
}

// "Container: docker 3f4a9c1e2b7d… (pod 1b2c…): pid 4242 is 1 in the container, 4250 is 7"
std::string ContainerLine(const ContainerInfo& c) {
  std::string out =
      c.container_id.empty()
          ? "Pod: " + c.pod_uid
          : "Container: " + (c.runtime.empty() ? "" : c.runtime + " ") + c.container_id;
  // The pod as kubectl names it (namespace/name) where its environment said, and its UID.
  std::string pod = c.pod_name.empty()        ? ""
                    : c.pod_namespace.empty() ? c.pod_name
                                              : c.pod_namespace + "/" + c.pod_name;
  if (!c.container_id.empty() && !c.pod_uid.empty()) {
    out += " (pod " + (pod.empty() ? "" : pod + ", UID ") + c.pod_uid + ")";
  } else if (c.container_id.empty() && !pod.empty()) {
    out += " (" + pod + ")";
  }
  std::string pids;
  bool renumbered = false;
  for (size_t i = 0; i < c.pids.size() && i < 8; ++i) {
    auto [pid, ns] = c.pids[i];
    pids += (pids.empty() ? "" : ", ") + std::to_string(pid);
    if (ns > 0 && ns != pid) {
      pids += Fmt(i == 0 ? " is %d in the container" : " is %d", ns);
      renumbered = true;
    }
  }
  if (c.pids.size() > 8) pids += Fmt(", … (%zu processes)", c.pids.size());
  out += ": pid" + std::string(c.pids.size() == 1 ? " " : "s ") + pids;
  if (!renumbered) out += " (the same pids in the container)";
  return out;
}

}  // namespace

std::string ReportToText(const Report& r) {
  std::string out;
  if (r.long_window.tier != "raw") out += LongWindowText(r.long_window);
  if (r.system.present) {
    out +=
        Fmt("System Context: CPU: %.1f%% | Memory: %.1f%% | Load: %.1f (%lld cores) | Swap: "
            "%.0f MB\n",
            r.system.cpu_pct, r.system.mem_pct, r.system.load1,
            static_cast<long long>(r.system.cores), r.system.swap_mb);
  } else {
    out += Fmt("System Context: no system snapshots (%lld cores)\n",
               static_cast<long long>(r.system.cores));
  }
  for (const ContainerInfo& c : r.containers) out += ContainerLine(c) + "\n";
  for (const GpuSummary& g : r.gpus) out += "  " + GpuLine(g) + "\n";
  if (!r.gpu_verdict.empty()) out += "  → " + r.gpu_verdict + "\n";
  out += "\n" + BudgetText(r.budget, HasFindingWorthFixing(r.findings));
  out += "Causal Chains (" + r.window.label + "):\n" + std::string(kRule) + "\n";
  bool any = false;
  for (const Finding& f : r.findings) {
    any = true;
    // The headline: what this cause cost the GPU feed, as --json's lost_s says.
    std::string lost = f.lost_s >= 0.05 ? Fmt(" (%.1f s lost)", f.lost_s) : "";
    out += Fmt("[%s] %s%s\n", SeverityName(f.severity), Title(f).c_str(), lost.c_str());
    AppendLines(&out, "Root:", f.root);
    AppendLines(&out, "Effect:", f.effects);
    AppendLines(&out, "Contributing:", f.contributing);
    AppendLines(&out, "Fix:", f.fix);
    if (r.evidence) {
      for (const EvidenceQuery& q : f.evidence) {
        out += "  Evidence:     -- " + q.what + "\n";
        // Copy-paste runs it on the same file: --db always, shell-quoted.
        std::string db = r.db_path.empty() ? "" : " --db " + ShellQuote(r.db_path);
        out += Indent("gpuwhy query" + db + " \"" + q.sql + "\"", "                ");
      }
    }
    out += "\n";
  }
  if (!any && r.long_window.tier == "rollups") {
    out += "No causal chains: they need raw rows, and this window has none to read.\n\n";
  } else if (!any && r.budget.present && !r.budget.gpu_bound) {
    out +=
        Fmt("No causal chains: the GPU sat idle %.1f s of %.1f s and no host cause on the "
            "critical path explains it (see the GPU time above).\n\n",
            r.budget.gpu_idle_s, r.budget.window_s);
  } else if (!any) {
    out += "No causal chains: nothing in this window stands out from the run's own baseline.\n\n";
  }
  for (const FeedTimeGroup& g : r.feed_time) {
    out += Fmt("GPU feed-time attribution — %s: %d thread%s, %.1f thread-seconds %s\n",
               g.name.c_str(), g.threads, g.threads == 1 ? "" : "s", g.thread_seconds,
               r.budget.present
                   ? Fmt("over the job's %.1f s loop", r.budget.window_s).c_str()
                   : Fmt("of %.1f s wall clock",
                         static_cast<double>(r.window.to_ns - r.window.from_ns) / 1e9)
                         .c_str());
    Table t;
    t.columns = {"cause", "seconds", "share"};
    for (const FeedTimeRow& row : g.rows) {
      t.rows.push_back({std::string(FeedCauseLabel(row.cause)), Fmt("%.1f", row.seconds),
                        Fmt("%.1f%%", row.pct)});
    }
    out += Indent(FormatTable(t, TableFormat::kText), "  ");
    out += "\n";
  }
  AppendCallerSections(&out, r);
  AppendCpuProfiles(&out, r);
  if (r.kernels.launches > 0) {
    const KernelSummary& k = r.kernels;
    out += Fmt(
        "Top kernels by launches (%s): %s launches of %s kernels, %s named%s\n",
        r.window.label.c_str(), LaunchFigure(k).c_str(), FormatCount(k.kernels).c_str(),
        FormatPct(1.0 - static_cast<double>(k.unnamed) / static_cast<double>(k.launches)).c_str(),
        (std::string(k.estimated
                         ? Fmt(" (estimated from %s counted)", FormatCount(k.counted).c_str())
                         : "") +
         (k.graph_kernels > 0
              ? Fmt("; %s run by CUDA Graph launches", FormatCount(k.graph_kernels).c_str())
              : ""))
            .c_str());
    Table t;
    t.columns = {"kernel", "pid", "launches", "per_s", "share"};
    for (size_t i = 0; i < k.top.size() && i < 10; ++i) {
      const KernelStat& s = k.top[i];
      t.rows.push_back({ShortKernelName(s.name), static_cast<int64_t>(s.pid), s.launches,
                        FormatRate(s.per_s), Fmt("%.1f%%", s.share_pct)});
    }
    out += Indent(FormatTable(t, TableFormat::kText), "  ");
    out += "\n";
  }
  if (!r.top_processes.empty()) {
    out += "Processes (" + r.window.label + "):\n";
    Table t;
    t.columns = {"process", "pid",    "role",           "switches",  "off_cpu_s",
                 "idle_s",  "runq_s", "worst_stall_ms", "took_cpu_s"};
    // In containers: the pid there and the container (its short id, as docker ps prints it).
    bool contained = false;
    for (const ProcessStat& p : r.top_processes) {
      contained |=
          !p.container_id.empty() || !p.pod_uid.empty() || (p.ns_pid > 0 && p.ns_pid != p.pid);
    }
    if (contained) {
      t.columns.insert(t.columns.begin() + 2, "ns_pid");
      t.columns.insert(t.columns.begin() + 3, "container");
    }
    for (const ProcessStat& p : r.top_processes) {
      std::vector<Cell> row = {p.name,
                               static_cast<int64_t>(p.pid),
                               p.role,
                               p.context_switches,
                               Fmt("%.1f", p.off_cpu_s),
                               Fmt("%.1f", p.idle_s),
                               Fmt("%.1f", p.runq_s),
                               Fmt("%.1f", p.worst_stall_ms),
                               Fmt("%.1f", p.cpu_taken_from_feeders_s)};
      if (contained) {
        row.insert(row.begin() + 2,
                   p.ns_pid > 0 ? Cell(static_cast<int64_t>(p.ns_pid)) : Cell(std::string("-")));
        row.insert(row.begin() + 3, !p.container_id.empty() ? p.container_id.substr(0, 12)
                                    : !p.pod_uid.empty()    ? "pod " + p.pod_uid.substr(0, 8)
                                                            : std::string("-"));
      }
      t.rows.push_back(std::move(row));
    }
    out += Indent(FormatTable(t, TableFormat::kText), "  ");
    out += "  idle_s: asleep waiting for work (woken by its parent: a DataLoader worker waiting "
           "for its next index)\n"
           "  worst_stall_ms: its longest other off-CPU interval since the job's first CUDA "
           "call\n";
  }
  for (const std::string& n : r.notes) out += "note: " + n + "\n";
  // Names and command lines in Root/Fix/Contributing lines come from traced processes.
  return TerminalSafe(out, /*keep_line_breaks=*/true);
}

nlohmann::ordered_json ReportJson(const Report& r) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["window"] = {{"session", r.window.session},
                 {"from_ns", r.window.from_ns},
                 {"to_ns", r.window.to_ns},
                 {"seconds", R(static_cast<double>(r.window.to_ns - r.window.from_ns) / 1e9)},
                 {"label", r.window.label}};
  if (r.system.present) {
    j["system"] = {{"cpu_pct", R(r.system.cpu_pct)},
                   {"mem_pct", R(r.system.mem_pct)},
                   {"load1", R(r.system.load1)},
                   {"cores", r.system.cores},
                   {"swap_mb", R(r.system.swap_mb)},
                   {"iowait_pct", R(r.system.iowait_pct)},
                   {"major_faults_per_s", r.system.major_faults_per_s}};
  } else {
    j["system"] = {{"cores", r.system.cores}};
  }
  if (!r.gpus.empty()) {
    ordered_json gpus = ordered_json::array();
    for (const GpuSummary& g : r.gpus) {
      gpus.push_back({{"gpu", g.gpu},
                      {"name", g.name},
                      {"gpm", g.gpm},
                      {"samples", g.samples},
                      {"util_pct", Pct(g.util_pct)},
                      {"mem_util_pct", Pct(g.mem_util_pct)},
                      {"sm_active_pct", Pct(g.sm_active_pct)},
                      {"sm_occupancy_pct", Pct(g.sm_occupancy_pct)},
                      {"tensor_active_pct", Pct(g.tensor_active_pct)},
                      {"dram_bw_pct", Pct(g.dram_bw_pct)},
                      {"sm_clock_mhz", Pct(g.sm_clock_mhz)},
                      {"power_w", Pct(g.power_w)},
                      {"mem_used_gb", Pct(g.mem_used_gb)}});
    }
    j["gpus"] = gpus;
    if (!r.gpu_verdict.empty()) j["gpu_verdict"] = r.gpu_verdict;
  }
  ordered_json findings = ordered_json::array();
  for (const Finding& f : r.findings) {
    ordered_json jf;
    jf["rule"] = f.rule;
    jf["severity"] = SeverityName(f.severity);
    jf["title"] = Title(f);
    jf["cause"] = f.cause;
    jf["effect"] = f.effect;
    jf["root"] = f.root;
    jf["effects"] = f.effects;
    jf["contributing"] = f.contributing;
    jf["fix"] = f.fix;
    jf["lost_s"] = R(f.lost_s);
    ordered_json spans = ordered_json::array();
    for (const TimeInterval& t : f.intervals) {
      spans.push_back({{"from_s", R(static_cast<double>(t.begin_ns) / 1e9)},
                       {"to_s", R(static_cast<double>(t.end_ns) / 1e9)}});
    }
    jf["intervals"] = spans;
    if (f.gpu.present) {
      jf["gpu_effect"] = {{"gpu", f.gpu.gpu},
                          {"metric", f.gpu.metric},
                          {"blamed_pct", R(f.gpu.blamed_pct)},
                          {"quiet_pct", Pct(f.gpu.quiet_pct)},
                          {"blamed_samples", f.gpu.blamed_samples},
                          {"quiet_samples", f.gpu.quiet_samples},
                          {"blamed_s", R(f.gpu.blamed_s)},
                          {"gpu_idle_s", Pct(f.gpu.gpu_idle_s) /* null: no baseline */}};
    }
    ordered_json metrics = ordered_json::array();
    for (const Metric& m : f.metrics) {
      metrics.push_back({{"name", m.name}, {"value", R(m.value)}, {"unit", m.unit}});
    }
    jf["metrics"] = metrics;
    ordered_json ev = ordered_json::array();
    for (const EvidenceQuery& q : f.evidence) ev.push_back({{"what", q.what}, {"sql", q.sql}});
    jf["evidence"] = ev;
    findings.push_back(jf);
  }
  j["findings"] = findings;
  if (r.budget.present) {
    const GpuBudget& b = r.budget;
    ordered_json lines = ordered_json::array();
    for (const BudgetLine& line : b.lines) {
      lines.push_back({{"cause", BudgetCauseKey(line.cause)},
                       {"label", BudgetCauseLabel(line.cause)},
                       {"path_s", R(line.path_s)},
                       {"lost_s", R(line.lost_s)}});
    }
    j["budget"] = {{"source", b.source},
                   {"gpu", b.gpu},
                   {"window_s", R(b.window_s)},
                   {"startup_s", R(b.startup_s)},
                   {"exit_s", R(b.exit_s)},
                   {"gpu_busy_job_s", R(b.gpu_busy_job_s)},
                   {"gpu_busy_other_s", R(b.gpu_busy_other_s)},
                   {"gpu_idle_s", R(b.gpu_idle_s)},
                   {"idle_attributed_s", R(b.idle_attributed_s)},
                   {"idle_unattributed_s", R(b.idle_unattributed_s)},
                   {"gpu_bound", b.gpu_bound},
                   {"hold_tid", b.hold_tid},
                   {"causes", lines}};
  }
  ordered_json feed = ordered_json::array();
  for (const FeedTimeGroup& g : r.feed_time) {
    ordered_json rows = ordered_json::array();
    for (const FeedTimeRow& row : g.rows) {
      rows.push_back({{"cause", FeedCauseName(row.cause)},
                      {"label", FeedCauseLabel(row.cause)},
                      {"seconds", R(row.seconds)},
                      {"pct", R(row.pct)}});
    }
    feed.push_back({{"group", g.name},
                    {"threads", g.threads},
                    {"thread_seconds", R(g.thread_seconds)},
                    {"causes", rows}});
  }
  j["feed_time"] = feed;
  ordered_json procs = ordered_json::array();
  for (const ProcessStat& p : r.top_processes) {
    procs.push_back({{"pid", p.pid},
                     {"name", p.name},
                     {"role", p.role},
                     {"tracked", p.tracked},
                     {"context_switches", p.context_switches},
                     {"off_cpu_s", R(p.off_cpu_s)},
                     {"runq_s", R(p.runq_s)},
                     {"idle_s", R(p.idle_s)},
                     {"worst_stall_ms", R(p.worst_stall_ms)},
                     {"took_cpu_from_feeders_s", R(p.cpu_taken_from_feeders_s)},
                     {"cuda_calls", p.cuda_calls}});
    // Only where known, so output for a host job is unchanged.
    if (p.ns_pid > 0) procs.back()["ns_pid"] = p.ns_pid;
    if (!p.container_id.empty()) procs.back()["container_id"] = p.container_id;
    if (!p.pod_uid.empty()) procs.back()["pod_uid"] = p.pod_uid;
  }
  j["top_processes"] = procs;
  if (!r.containers.empty()) {
    ordered_json containers = ordered_json::array();
    for (const ContainerInfo& c : r.containers) {
      ordered_json pids = ordered_json::array();
      for (auto [pid, ns] : c.pids) {
        pids.push_back({{"pid", pid}, {"ns_pid", ns > 0 ? ordered_json(ns) : ordered_json()}});
      }
      containers.push_back({{"runtime", c.runtime},
                            {"container_id", c.container_id},
                            {"pod_uid", c.pod_uid},
                            {"pod_name", c.pod_name},
                            {"pod_namespace", c.pod_namespace},
                            {"processes", pids}});
    }
    j["containers"] = containers;
  }
  ordered_json callers = ordered_json::array();
  for (const CallerSection& c : r.callers) callers.push_back(SectionJson(c));
  j["callers"] = callers;
  ordered_json kernels = ordered_json::array();
  for (const KernelStat& s : r.kernels.top) {
    kernels.push_back({{"name", s.name},
                       {"pid", s.pid},
                       {"launches", s.launches},
                       {"per_s", R(s.per_s)},
                       {"share_pct", R(s.share_pct)}});
  }
  j["kernels"] = {{"launches", r.kernels.launches},
                  {"counted", r.kernels.counted},
                  {"estimated", r.kernels.estimated},
                  {"error", R(r.kernels.error)},
                  {"uncovered_s", R(r.kernels.uncovered_s)},
                  {"kernels", r.kernels.kernels},
                  {"unnamed_launches", r.kernels.unnamed},
                  {"graph_kernels", r.kernels.graph_kernels},
                  {"launch_duty", r.kernels.launch_duty},
                  {"top", kernels}};
  j["sched_victims"] =
      r.sched_victims.sites.empty() ? ordered_json(nullptr) : SectionJson(r.sched_victims);
  ordered_json profiles = ordered_json::array();
  for (const CpuProfileSection& p : r.cpu_profiles) {
    CallerSection as_section;
    as_section.sites = p.sites;
    ordered_json section = SectionJson(as_section);
    profiles.push_back({{"role", p.role},
                        {"title", p.title},
                        {"tids", p.tids},
                        {"samples", p.samples},
                        {"kernel_samples", p.kernel_samples},
                        {"sync_samples", p.sync_samples},
                        {"profile_hz", p.profile_hz},
                        {"cpu_s", R(p.cpu_s)},
                        {"window_s", R(p.window_s)},
                        {"sites", section["sites"]}});
  }
  j["cpu_profiles"] = profiles;
  j["events"] = r.events;
  j["notes"] = r.notes;
  const LongWindowSummary& l = r.long_window;
  ordered_json lw = {{"answered_from", l.tier}};
  if (l.tier != "raw") {
    lw["from_ns"] = l.from_ns;
    lw["to_ns"] = l.to_ns;
    lw["label"] = l.label;
    lw["estimated_rows"] = l.estimated_rows;
    lw["raw_first_ts"] = l.has_raw ? ordered_json(l.raw_first_ts) : ordered_json(nullptr);
    if (l.has_incident) {
      lw["incident"] = {{"from_ns", l.incident_from_ns},
                        {"to_ns", l.incident_to_ns},
                        {"lost_s", R(l.incident_lost_s)},
                        {"typical_lost_s", R(l.typical_lost_s)},
                        {"calls_per_s", R(l.calls_per_s_incident)},
                        {"chosen_as", l.incident_latest ? "latest" : "most_lost"}};
    }
    lw["main"] = {{"pid", l.main_pid},
                  {"tid", l.main_tid},
                  {"active_s", R(l.active_s)},
                  {"runq_s", R(l.runq_s)},
                  {"io_s", R(l.io_s)},
                  {"fault_s", R(l.fault_s)},
                  {"blocked_s", R(l.blocked_s)},
                  {"sync_s", R(l.sync_s)},
                  {"lost_s", R(l.lost_s)},
                  {"switches", l.switches},
                  {"calls_per_s_median", R(l.calls_per_s_median)},
                  {"low_buckets", l.low_buckets},
                  {"buckets", l.buckets}};
    lw["other_tracked"] = {{"runq_s", R(l.others_runq_s)},
                           {"io_s", R(l.others_io_s)},
                           {"fault_s", R(l.others_fault_s)},
                           {"switches", l.others_switches}};
  }
  j["window_tier"] = std::move(lw);
  return j;
}

std::string ReportToJson(const Report& r) { return JsonText(ReportJson(r)); }

}  // namespace gw
