#include "analysis/nccl.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <utility>

#include "analysis/thresholds.h"

namespace gw {

namespace th = thresholds;

int64_t MedianNs(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  size_t mid = (v.size() - 1) / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

int64_t MadNs(const std::vector<int64_t>& v) {
  if (v.empty()) return 0;
  int64_t m = MedianNs(v);
  std::vector<int64_t> dev;
  dev.reserve(v.size());
  for (int64_t x : v) dev.push_back(std::llabs(x - m));
  return MedianNs(std::move(dev));
}

namespace {

// A node-qualified pid for the merged analysis: Linux pids stay below 2^22 (pid_max's limit).
constexpr int kNodeShift = 22;
constexpr int32_t kPidMask = (1 << kNodeShift) - 1;

// When each of a node's collectives completed, as its ranks saw it: (comm, seq) → the median
// over its ranks of the end of each rank's first sync starting at or after its enqueue.
std::map<std::pair<std::string, int64_t>, int64_t> Completions(const NcclNodeRows& n) {
  std::map<int32_t, std::vector<const Event*>> syncs_of;
  for (const Event& e : n.syncs) {
    if (IsSync(e.op)) syncs_of[e.pid].push_back(&e);
  }
  std::map<std::pair<std::string, int64_t>, std::vector<int64_t>> seen;
  for (const NcclCallRow& c : n.calls) {
    if (!IsNcclCollective(c.op) || c.seq == kNull || (c.ret != kNull && c.ret != 0)) continue;
    const std::vector<const Event*>& ws = syncs_of[c.pid];
    auto it = std::lower_bound(ws.begin(), ws.end(), c.ts,
                               [](const Event* e, int64_t t) { return e->ts_ns < t; });
    if (it == ws.end()) continue;
    seen[{c.comm, c.seq}].push_back((*it)->End());
  }
  std::map<std::pair<std::string, int64_t>, int64_t> out;
  for (auto& [key, ends] : seen) out[key] = MedianNs(std::move(ends));
  return out;
}

}  // namespace

NcclFleet AnalyzeNcclAcrossNodes(const std::vector<NcclNodeRows>& nodes) {
  NcclFleet fleet;
  std::vector<std::map<std::pair<std::string, int64_t>, int64_t>> done;
  for (const NcclNodeRows& n : nodes) {
    NcclNodeRows wall = n;  // Completions on the node's own wall clock
    for (NcclCallRow& c : wall.calls) c.ts += n.wall_start_ns;
    for (Event& e : wall.syncs) e.ts_ns += n.wall_start_ns;
    done.push_back(Completions(wall));
  }
  std::vector<NcclCallRow> calls;
  std::vector<Event> syncs;
  for (size_t k = 0; k < nodes.size(); ++k) {
    NcclNodeClock clock;
    clock.node = nodes[k].node;
    if (k > 0) {
      std::vector<int64_t> diffs;
      for (const auto& [key, t] : done[k]) {
        auto ref = done[0].find(key);
        if (ref != done[0].end()) diffs.push_back(ref->second - t);
      }
      clock.collectives = static_cast<int64_t>(diffs.size());
      clock.offset_ns = MedianNs(diffs);
      clock.error_ns = MadNs(diffs);
    } else {
      clock.collectives = static_cast<int64_t>(done[0].size());
    }
    int64_t shift = nodes[k].wall_start_ns + clock.offset_ns;
    int32_t tag = static_cast<int32_t>(k) << kNodeShift;
    for (NcclCallRow c : nodes[k].calls) {
      c.ts += shift;
      c.pid = tag | (c.pid & kPidMask);
      calls.push_back(std::move(c));
    }
    for (Event e : nodes[k].syncs) {
      e.ts_ns += shift;
      e.pid = tag | (e.pid & kPidMask);
      syncs.push_back(e);
    }
    fleet.clocks.push_back(std::move(clock));
  }
  std::stable_sort(calls.begin(), calls.end(), [](auto& a, auto& b) { return a.ts < b.ts; });
  std::stable_sort(syncs.begin(), syncs.end(), [](auto& a, auto& b) { return a.ts_ns < b.ts_ns; });
  fleet.job = AnalyzeNccl(calls, syncs);
  for (NcclCommunicator& c : fleet.job.comms) {
    for (NcclRankStats& r : c.ranks) {
      r.node = r.pid >> kNodeShift;
      r.pid &= kPidMask;
    }
  }
  return fleet;
}

bool NcclPeers(const NcclJob& job, int32_t a, int32_t b) {
  for (const NcclCommunicator& c : job.comms) {
    bool has_a = false, has_b = false;
    for (const NcclRankStats& r : c.ranks) {
      has_a |= r.pid == a;
      has_b |= r.pid == b;
    }
    if (has_a && has_b) return true;
  }
  return false;
}

namespace {

struct Enqueue {
  int64_t ts = 0;
  Op op = Op::kNcclAllReduce;
};

// One communicator's rows: its ranks (pid → rank) and its collectives by sequence number.
struct CommRows {
  int64_t nranks = 0;
  std::map<int32_t, int64_t> rank_of;
  std::map<int64_t, std::map<int32_t, Enqueue>> by_seq;
};

}  // namespace

NcclJob AnalyzeNccl(const std::vector<NcclCallRow>& calls, const std::vector<Event>& syncs) {
  NcclJob job;
  std::map<std::string, CommRows> comms;
  for (const NcclCallRow& c : calls) {
    if (c.op == Op::kNcclCommInit && c.ret == 0 && !c.comm.empty()) {
      CommRows& rows = comms[c.comm];
      if (c.bytes != kNull) rows.nranks = c.bytes;
      if (c.kind != kNull) rows.rank_of[c.pid] = c.kind;
    }
  }
  for (const NcclCallRow& c : calls) {
    if (!IsNcclCollective(c.op) || (c.ret != kNull && c.ret != 0) || c.seq == kNull) continue;
    auto it = comms.find(c.comm);
    if (it == comms.end()) {
      ++job.unaligned_rows;  // trace attached after the communicator was made
      continue;
    }
    // The first row of a sequence number per rank (a repeat would be a second communicator
    // at a reused handle, which the BPF side restarts from 1).
    it->second.by_seq[c.seq].emplace(c.pid, Enqueue{c.ts, c.op});
  }

  // Sync rows per pid, by ts.
  std::map<int32_t, std::vector<const Event*>> syncs_of;
  for (const Event& e : syncs) {
    if (IsSync(e.op)) syncs_of[e.pid].push_back(&e);
  }

  for (auto& [name, rows] : comms) {
    if (rows.rank_of.size() < 2) continue;
    NcclCommunicator comm;
    comm.comm = name;
    comm.nranks = rows.nranks;
    std::map<int32_t, size_t> index;
    for (const auto& [pid, rank] : rows.rank_of) {
      NcclRankStats r;
      r.pid = pid;
      r.rank = rank;
      comm.ranks.push_back(r);
    }
    std::sort(comm.ranks.begin(), comm.ranks.end(),
              [](const NcclRankStats& a, const NcclRankStats& b) {
                return a.rank != b.rank ? a.rank < b.rank : a.pid < b.pid;
              });
    for (size_t i = 0; i < comm.ranks.size(); ++i) index[comm.ranks[i].pid] = i;
    const size_t n = comm.ranks.size();
    std::vector<std::vector<int64_t>> late(n);
    std::map<Op, int64_t> ops;
    // Complete collectives: seq → enqueue per rank index.
    std::vector<std::vector<int64_t>> complete;
    for (const auto& [seq, by_pid] : rows.by_seq) {
      if (by_pid.size() != n) {
        ++comm.incomplete;
        continue;
      }
      std::vector<int64_t> ts(n, 0);
      bool all = true;
      for (const auto& [pid, enq] : by_pid) {
        auto it = index.find(pid);
        if (it == index.end()) {
          all = false;
          break;
        }
        ts[it->second] = enq.ts;
        ++ops[enq.op];
      }
      if (!all) {
        ++comm.incomplete;
        continue;
      }
      int64_t first = *std::min_element(ts.begin(), ts.end());
      size_t last = static_cast<size_t>(std::max_element(ts.begin(), ts.end()) - ts.begin());
      for (size_t i = 0; i < n; ++i) late[i].push_back(ts[i] - first);
      ++comm.ranks[last].last;
      complete.push_back(std::move(ts));
    }
    comm.collectives = static_cast<int64_t>(complete.size());
    int64_t most = 0;
    for (const auto& [op, count] : ops) {
      if (count > most) most = count, comm.op = std::string(OpName(op));
    }
    for (size_t i = 0; i < n; ++i) {
      NcclRankStats& r = comm.ranks[i];
      r.collectives = comm.collectives;
      r.late_median_ns = MedianNs(late[i]);
      int64_t sum = 0;
      for (int64_t x : late[i]) sum += x;
      r.late_mean_ns = late[i].empty() ? 0 : sum / static_cast<int64_t>(late[i].size());
    }
    // The straggler: the latest rank, judged against the others' pooled lateness.
    if (comm.collectives >= th::kNcclMinCollectives) {
      size_t worst = 0;
      for (size_t i = 1; i < n; ++i) {
        if (comm.ranks[i].late_median_ns > comm.ranks[worst].late_median_ns) worst = i;
      }
      std::vector<int64_t> others;
      for (size_t i = 0; i < n; ++i) {
        if (i != worst) others.insert(others.end(), late[i].begin(), late[i].end());
      }
      int64_t base = MedianNs(others);
      int64_t spread =
          static_cast<int64_t>(th::kNcclMadK * 1.4826 * static_cast<double>(MadNs(others)));
      comm.threshold_ns = std::max(th::kNcclLateFloorNs, spread);
      double last_share =
          static_cast<double>(comm.ranks[worst].last) / static_cast<double>(comm.collectives);
      if (comm.ranks[worst].late_median_ns - base > comm.threshold_ns &&
          last_share >= th::kNcclLastShare) {
        comm.straggler = static_cast<int>(worst);
      }
    }
    // The wait it caused: each other rank's next sync after the collective, from the sync's
    // start until the straggler enqueued it (only collectives it enqueued last). Collectives
    // reaching the same sync (several buckets before one sync) count that sync once, up to the
    // latest of their straggler enqueues.
    if (comm.straggler >= 0) {
      size_t s = static_cast<size_t>(comm.straggler);
      for (size_t w = 0; w < n; ++w) {
        if (w == s) continue;
        const std::vector<const Event*>& ws = syncs_of[comm.ranks[w].pid];
        std::map<size_t, int64_t> until;  // sync index → latest straggler enqueue
        for (const std::vector<int64_t>& ts : complete) {
          if (*std::max_element(ts.begin(), ts.end()) != ts[s]) continue;
          auto it = std::lower_bound(ws.begin(), ws.end(), ts[w],
                                     [](const Event* e, int64_t t) { return e->ts_ns < t; });
          if (it == ws.end()) continue;
          size_t k = static_cast<size_t>(it - ws.begin());
          int64_t& u = until[k];
          u = std::max(u, ts[s]);
        }
        int64_t waited = 0;
        for (const auto& [k, u] : until) {
          const Event* e = ws[k];
          waited += std::max<int64_t>(0, std::min(e->End(), u) - e->ts_ns);
        }
        comm.ranks[w].waited_s = static_cast<double>(waited) / 1e9;
        comm.others_waited_s += comm.ranks[w].waited_s;
      }
    }
    job.comms.push_back(std::move(comm));
  }
  return job;
}

}  // namespace gw
