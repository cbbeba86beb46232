#include "analysis/cpu_profile.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "analysis/budget.h"
#include "analysis/callers.h"
#include "analysis/format.h"
#include "analysis/thresholds.h"

namespace gw {

namespace th = thresholds;

namespace {

constexpr size_t kMaxSites = 5;

std::string TidList(const std::vector<int32_t>& tids) {
  std::string out;
  for (size_t i = 0; i < tids.size() && i < 4; ++i) {
    out += (i ? ", " : "") + std::to_string(tids[i]);
  }
  if (tids.size() > 4) out += Fmt(" and %zu more", tids.size() - 4);
  return out;
}

// Whether the group ran long enough, per thread, to be worth its own section.
// Enough CPU time outside CUDA syncs to be worth a section (spinning on the GPU is a wait).
bool Material(const CpuProfileSection& p) {
  int64_t working = p.samples - p.sync_samples;
  if (working < th::kProfileMinSamples || p.window_s <= 0 || p.tids.empty()) return false;
  double working_s = static_cast<double>(working) / static_cast<double>(p.profile_hz);
  return working_s / static_cast<double>(p.tids.size()) >= th::kProfileShowShare * p.window_s;
}

// The CUDA syncs of some threads, by start: a sample inside one is the CPU spinning on the GPU.
class SyncSpans {
 public:
  SyncSpans(const WindowData& w, const std::set<int32_t>& tids) {
    for (const std::vector<Event>* rows : {&w.carry_in, &w.events}) {
      for (const Event& e : *rows) {
        if (IsSync(e.op) && e.duration_ns > 0 && tids.count(e.tid)) {
          spans_[e.tid].push_back({e.ts_ns, e.ts_ns + e.duration_ns});
        }
      }
    }
    for (auto& [tid, v] : spans_) std::sort(v.begin(), v.end());
  }
  bool Contains(const CpuSampleRow& s) const {
    auto it = spans_.find(s.tid);
    if (it == spans_.end()) return false;
    auto next = std::upper_bound(it->second.begin(), it->second.end(),
                                 std::make_pair(s.ts_ns, std::numeric_limits<int64_t>::max()));
    return next != it->second.begin() && s.ts_ns < std::prev(next)->second;
  }

 private:
  std::map<int32_t, std::vector<std::pair<int64_t, int64_t>>> spans_;
};

// libc's file-writing calls, as the symbolizer may name them (__GI___libc_write, __write,
// write): a sample in the kernel under one is the kernel writing (copying into the page cache,
// flushing).
bool IsWriteCall(std::string name) {
  for (bool again = true; again;) {
    again = false;
    size_t n = name.find_first_not_of('_');
    if (n != 0 && n != std::string::npos) name.erase(0, n), again = true;
    for (const char* prefix : {"GI_", "libc_"}) {
      if (name.rfind(prefix, 0) == 0) name.erase(0, std::string(prefix).size()), again = true;
    }
  }
  static const std::set<std::string> kWrites = {
      "write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev2", "write_nocancel",
      "fsync", "fdatasync", "sync_file_range", "msync", "copy_file_range", "sendfile"};
  return kWrites.count(name) > 0;
}

}  // namespace

WriterProfile WriterSamples(const WindowData& w, int32_t tid, int64_t from, int64_t to) {
  WriterProfile out;
  if (w.profile_hz <= 0 || w.cpu_samples.empty() || tid == 0) return out;
  SyncSpans syncs(w, {tid});
  auto frames_of = [&](const CpuSampleRow& s) -> const std::vector<StackFrameRow>* {
    auto it = w.stack_frames.find(s.stack_id);
    return s.stack_id == 0 || it == w.stack_frames.end() ? nullptr : &it->second;
  };
  auto key = [](const StackFrameRow& f) { return f.file + "\n" + f.function; };
  // Pass 1: samples in the kernel under a write call, and the Python function nearest to each.
  std::map<std::string, int64_t> write_samples;  // innermost Python function -> samples
  std::map<std::string, StackFrameRow> frame_of;
  std::vector<const CpuSampleRow*> working;
  std::vector<const CpuSampleRow*> spinning;  // inside the thread's CUDA syncs
  for (const CpuSampleRow& s : w.cpu_samples) {
    if (s.tid != tid || s.ts_ns < from || s.ts_ns >= to) continue;
    if (syncs.Contains(s)) {
      spinning.push_back(&s);
      continue;
    }
    working.push_back(&s);
    const std::vector<StackFrameRow>* frames = frames_of(s);
    if (!s.in_kernel || frames == nullptr || frames->empty() || frames->front().python ||
        !IsWriteCall(frames->front().function)) {
      continue;
    }
    ++out.write_samples;
    for (const StackFrameRow& f : *frames) {
      if (!f.python || f.function.empty()) continue;
      ++write_samples[key(f)];
      frame_of.emplace(key(f), f);
      break;
    }
  }
  out.working_samples = static_cast<int64_t>(working.size());
  if (out.write_samples == 0) return out;
  // Pass 2: every sample under those functions is the writer's (serializing what it writes),
  // when at least th::kWriterMinWriteShare of the function's samples are in write calls (a loop
  // that writes a line now and then is not a writer) and it is not the thread's loop: under
  // th::kWriterMaxEnclosingShare or more of all its samples, those spinning in its CUDA syncs
  // included (a loop syncs under itself; a checkpoint that is most of the thread's computing
  // does not hold its syncs, so it stays the writer).
  std::map<std::string, int64_t> under;      // working samples with the function on the stack
  std::map<std::string, int64_t> enclosing;  // all samples, spinning ones included
  auto count_under = [&](const std::vector<const CpuSampleRow*>& samples,
                         std::map<std::string, int64_t>* out) {
    for (const CpuSampleRow* s : samples) {
      const std::vector<StackFrameRow>* frames = frames_of(*s);
      if (frames == nullptr) continue;
      std::set<std::string> seen;
      for (const StackFrameRow& f : *frames) {
        if (f.python && write_samples.count(key(f)) && seen.insert(key(f)).second) ++(*out)[key(f)];
      }
    }
  };
  count_under(working, &under);
  enclosing = under;
  count_under(spinning, &enclosing);
  std::set<std::string> writers;
  int64_t best = 0;
  const auto all = static_cast<double>(working.size() + spinning.size());
  for (const auto& [k, n] : under) {
    auto samples = static_cast<double>(n);
    if (static_cast<double>(write_samples[k]) < th::kWriterMinWriteShare * samples ||
        static_cast<double>(enclosing[k]) >= th::kWriterMaxEnclosingShare * all) {
      continue;
    }
    writers.insert(k);
    if (n > best) {
      best = n;
      const StackFrameRow& f = frame_of[k];
      out.function = f.function;
      out.location = Fmt("%s:%lld", f.file.c_str(), static_cast<long long>(f.line));
    }
  }
  for (const CpuSampleRow* s : working) {
    const std::vector<StackFrameRow>* frames = frames_of(*s);
    bool writer = false;
    if (frames != nullptr && !frames->empty()) {
      writer = s->in_kernel && !frames->front().python && IsWriteCall(frames->front().function);
      for (size_t i = 0; !writer && i < frames->size(); ++i) {
        writer = (*frames)[i].python && writers.count(key((*frames)[i])) > 0;
      }
    }
    if (writer) out.writer_ts.push_back(s->ts_ns);
  }
  std::sort(out.writer_ts.begin(), out.writer_ts.end());
  out.writer_samples = static_cast<int64_t>(out.writer_ts.size());
  out.writer_s = static_cast<double>(out.writer_samples) / static_cast<double>(w.profile_hz);
  return out;
}

std::string GilHolderTitle(int32_t tid) { return Fmt("thread %d (the GIL holder)", tid); }

std::optional<CpuProfileSection> ProfileThreads(const WindowData& w,
                                                const std::vector<int32_t>& tids, int64_t from,
                                                int64_t to) {
  if (w.profile_hz <= 0 || w.cpu_samples.empty() || tids.empty()) return std::nullopt;
  std::set<int32_t> want(tids.begin(), tids.end());
  CpuProfileSection p;
  p.tids = tids;
  p.profile_hz = w.profile_hz;
  p.window_s = static_cast<double>(std::max<int64_t>(0, to - from)) / 1e9;
  struct Site {
    CallSite site;
    int64_t count = 0;
  };
  std::map<std::string, Site> sites;
  std::unordered_map<int64_t, StackSite> site_of;  // stack id → site
  SyncSpans syncs(w, want);
  for (const CpuSampleRow& s : w.cpu_samples) {
    if (!want.count(s.tid) || s.ts_ns < from || s.ts_ns >= to) continue;
    ++p.samples;
    if (s.in_kernel) ++p.kernel_samples;
    if (syncs.Contains(s)) {
      ++p.sync_samples;
      continue;
    }
    auto it = site_of.find(s.stack_id);
    if (it == site_of.end()) {
      StackSite picked;
      auto frames = w.stack_frames.find(s.stack_id);
      if (s.stack_id == 0) {
        picked.key = picked.display.location = "(no stack)";
      } else if (frames == w.stack_frames.end()) {
        picked.key = picked.display.location = "(stack not stored)";
      } else {
        picked = PickStackSite(frames->second);
      }
      it = site_of.emplace(s.stack_id, std::move(picked)).first;
    }
    Site& site = sites[it->second.key];
    if (site.count == 0) site.site = it->second.display;
    ++site.count;
  }
  if (p.samples == 0) return std::nullopt;
  p.cpu_s = static_cast<double>(p.samples) / static_cast<double>(p.profile_hz);
  std::vector<Site*> order;
  for (auto& [key, s] : sites) order.push_back(&s);
  std::sort(order.begin(), order.end(), [](const Site* a, const Site* b) {
    if (a->count != b->count) return a->count > b->count;
    return a->site.location < b->site.location;
  });
  for (Site* s : order) {
    if (p.sites.size() >= kMaxSites) break;
    CallSite c = s->site;
    c.count = s->count;
    c.total_ms = static_cast<double>(s->count) * 1e3 / static_cast<double>(p.profile_hz);
    c.avg_ms = c.total_ms / static_cast<double>(s->count);
    p.sites.push_back(std::move(c));
  }
  return p;
}

std::string TopSiteLine(const CpuProfileSection& p) {
  if (p.sites.empty() || p.samples <= 0) return "";
  const CallSite& s = p.sites.front();
  std::string where = s.location;
  if (!s.function.empty() && s.function != s.location) where += " in " + s.function;
  std::string line = Fmt("%s (%.0f%% of %lld samples", where.c_str(),
                         100.0 * static_cast<double>(s.count) / static_cast<double>(p.samples),
                         static_cast<long long>(p.samples));
  if (!s.via.empty()) line += ", via " + s.via;
  return line + ")";
}

void AddCpuProfiles(const Facts& f, Report* report) {
  if (f.w == nullptr || f.w->profile_hz <= 0 || f.main_tid == 0) return;
  const WindowData& w = *f.w;
  auto profile = [&](const std::vector<int32_t>& tids) {
    return ProfileThreads(w, tids, f.loop_begin, f.loop_end);
  };
  if (auto p = profile({f.main_tid}); p && Material(*p)) {
    p->role = "main";
    p->title = Fmt("the main thread (tid %d)", f.main_tid);
    report->cpu_profiles.push_back(std::move(*p));
  }
  if (auto p = profile(f.helper_tids); p && Material(*p)) {
    p->role = "helpers";
    p->title = Fmt("the CUDA helper threads (autograd; tid %s)", TidList(f.helper_tids).c_str());
    report->cpu_profiles.push_back(std::move(*p));
  }
  // The workers', where the batches they computed cost the loop GPU time.
  if (BudgetLostS(f, BudgetCause::kBatchCompute) >= th::kMediumLostShare * f.budget.window_s) {
    std::vector<int32_t> tids;
    for (const auto& [pid, tid] : f.worker_rep_tid) tids.push_back(tid);
    if (auto p = profile(tids); p && Material(*p)) {
      p->role = "workers";
      p->title = Fmt("the DataLoader workers (tid %s)", TidList(tids).c_str());
      report->cpu_profiles.push_back(std::move(*p));
    }
  }
  auto [holder, held] = TopGilHolder(f);
  if (holder != 0) {
    if (auto p = profile({holder}); p && p->samples >= th::kProfileMinSamples) {
      p->role = "gil_holder";
      p->title = GilHolderTitle(holder);
      report->cpu_profiles.push_back(std::move(*p));
    }
  }
}

}  // namespace gw
