// Multi-rank NCCL jobs: the rank that enqueues collectives late, its own host-side cause, and
// the wait it costs the other ranks (docs/nccl.md).
#include <string>
#include <vector>

#include "analysis/format.h"
#include "analysis/rules.h"

namespace gw::rules {

namespace {

std::string RankLabel(const NcclRankStats& r) {
  return Fmt("rank %lld (pid %d)", static_cast<long long>(r.rank), r.pid);
}

const Facts::StragglerCause* CauseOf(const Facts& f, int32_t pid) {
  for (const Facts::StragglerCause& c : f.straggler_causes) {
    if (c.pid == pid) return &c;
  }
  return nullptr;
}

}  // namespace

void CollectiveStraggler(const Facts& f, std::vector<Finding>* out) {
  for (const NcclCommunicator& comm : f.nccl.comms) {
    if (comm.straggler < 0) continue;
    const NcclRankStats& s = comm.ranks[static_cast<size_t>(comm.straggler)];
    const size_t others = comm.ranks.size() - 1;
    double share = Share(comm.others_waited_s, f.window_s * static_cast<double>(others));
    std::optional<Severity> sev =
        Ladder(share, th::kNcclWaitHighShare, th::kNcclWaitMediumShare, th::kLowLostShare);
    if (!sev) continue;
    const Facts::StragglerCause* cause = CauseOf(f, s.pid);
    std::string why = "its own host side held it (no single cause found on its critical path)";
    if (cause != nullptr && !cause->rule.empty()) {
      why = cause->cause + " (" + cause->rule + ")";
    } else if (cause != nullptr && !cause->path.empty()) {
      why = "its main thread: " + cause->path;
    }
    Finding x;
    x.rule = "collective-straggler";
    x.severity = *sev;
    x.cause = "straggler rank in NCCL collectives: " + RankLabel(s);
    x.effect = "the other ranks wait for it in every collective";
    x.lost_s = comm.others_waited_s;
    x.root.push_back(
        Fmt("%s enqueued %s %s late on average (median %s; last in %lld of %lld "
            "collectives of communicator %s, %lld ranks): %s",
            RankLabel(s).c_str(), comm.op.c_str(), FormatNs(s.late_mean_ns).c_str(),
            FormatNs(s.late_median_ns).c_str(), static_cast<long long>(s.last),
            static_cast<long long>(comm.collectives), comm.comm.c_str(),
            static_cast<long long>(comm.ranks.size()), why.c_str()));
    if (cause != nullptr && !cause->detail.empty())
      x.root.push_back("on that rank: " + cause->detail);
    if (f.main_pid == s.pid) {
      x.root.push_back(
          "this process is that rank: its collective calls come late, the others "
          "wait for it");
    }
    std::string waited;
    for (const NcclRankStats& r : comm.ranks) {
      if (r.pid == s.pid) continue;
      waited += (waited.empty() ? "" : ", ") + Fmt("rank %lld %s s", static_cast<long long>(r.rank),
                                                   FormatSeconds(r.waited_s).c_str());
      if (r.pid == f.main_pid) {
        x.root.push_back(
            Fmt("this process is rank %lld: its %s s of collective wait (in its "
                "syncs) was caused by %s, not by itself",
                static_cast<long long>(r.rank), FormatSeconds(r.waited_s).c_str(),
                RankLabel(s).c_str()));
      }
    }
    x.effects.push_back(
        Fmt("the other %zu ranks waited %s s in their syncs for it (%s), "
            "%s of their time: measured from each sync's start until %s "
            "enqueued the collective",
            others, FormatSeconds(comm.others_waited_s).c_str(), waited.c_str(),
            FormatPct(share).c_str(), RankLabel(s).c_str()));
    if (cause != nullptr && !cause->path.empty()) {
      x.contributing.push_back("rank's main thread critical path: " + cause->path);
    }
    x.fix.push_back(
        Fmt("fix rank %lld's host side first (`gpuwhy explain --pid %d` is its own "
            "report); the other ranks' GPUs idle while it is late",
            static_cast<long long>(s.rank), s.pid));
    x.metrics.push_back({"straggler_rank", static_cast<double>(s.rank), ""});
    x.metrics.push_back({"straggler_pid", static_cast<double>(s.pid), ""});
    x.metrics.push_back({"late_mean_ms", static_cast<double>(s.late_mean_ns) / 1e6, "ms"});
    x.metrics.push_back({"late_median_ms", static_cast<double>(s.late_median_ns) / 1e6, "ms"});
    x.metrics.push_back({"threshold_ms", static_cast<double>(comm.threshold_ns) / 1e6, "ms"});
    x.metrics.push_back({"collectives", static_cast<double>(comm.collectives), "count"});
    x.metrics.push_back({"last", static_cast<double>(s.last), "count"});
    x.metrics.push_back({"others_waited_s", comm.others_waited_s, "s"});
    for (const NcclRankStats& r : comm.ranks) {
      if (r.pid == s.pid) continue;
      x.metrics.push_back(
          {Fmt("rank_%lld_waited_s", static_cast<long long>(r.rank)), r.waited_s, "s"});
    }
    SetEvidence(&x, {{"each rank's enqueue time of every collective of the communicator "
                      "(other_pid = the collective's sequence number)",
                      Sql(f,
                          "SELECT other_pid AS seq, pid, timestamp AS enqueue_ns, op, bytes "
                          "FROM {EVENTS} WHERE op IN (" +
                              OpNamesWhere(IsNcclCollective) + ") AND name = '" + comm.comm +
                              "' ORDER BY seq, timestamp")},
                     {"lateness per rank: mean ns behind the earliest rank",
                      Sql(f,
                          "WITH c AS (SELECT other_pid AS seq, pid, timestamp AS t FROM "
                          "{EVENTS} WHERE op IN (" +
                              OpNamesWhere(IsNcclCollective) + ") AND name = '" + comm.comm +
                              "'), f AS (SELECT seq, MIN(t) AS t0, COUNT(*) AS n FROM c GROUP "
                              "BY seq) SELECT c.pid, COUNT(*) AS collectives, "
                              "AVG(c.t - f.t0) AS late_ns_mean FROM c JOIN f USING (seq) "
                              "WHERE f.n = " +
                              std::to_string(comm.ranks.size()) +
                              " GROUP BY c.pid ORDER BY late_ns_mean DESC")}});
    out->push_back(std::move(x));
  }
}

}  // namespace gw::rules
