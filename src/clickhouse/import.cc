#include "clickhouse/import.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <type_traits>
#include <unordered_map>

#include "clickhouse/schema.h"
#include "store/event_columns.h"
#include "store/ops.h"
#include "store/writer.h"

namespace gw {

namespace {

// The shortest page of events read in one query (a page too long for one answer is split).
constexpr int64_t kMinPageNs = 100'000'000;

int64_t Int(const TsvRow& r, size_t i) {
  if (i >= r.fields.size() || r.null[i]) return kNull;
  return std::strtoll(r.fields[i].c_str(), nullptr, 10);
}

double Real(const TsvRow& r, size_t i, double if_null) {
  if (i >= r.fields.size() || r.null[i]) return if_null;
  return std::strtod(r.fields[i].c_str(), nullptr);
}

const std::string& Text(const TsvRow& r, size_t i) {
  static const std::string kEmpty;
  if (i >= r.fields.size() || r.null[i]) return kEmpty;
  return r.fields[i];
}

// Interns names as the replay goes: ClickHouse rows carry the text itself.
class Names {
 public:
  explicit Names(StoreWriter* writer) : writer_(writer) {}
  int64_t Id(const TsvRow& r, size_t i) {
    if (i >= r.fields.size() || r.null[i]) return kNull;
    auto [it, inserted] = ids_.try_emplace(r.fields[i], 0);
    if (inserted) it->second = writer_->InternString(r.fields[i]);
    return it->second;
  }

 private:
  StoreWriter* writer_;
  std::unordered_map<std::string, int64_t> ids_;
};

}  // namespace

StatusOr<std::vector<RemoteSession>> ListRemoteSessions(const ClickHouseClient& client,
                                                        const std::string& node,
                                                        int64_t since_wall_ns) {
  const std::string& db = client.url().database;
  std::string where = node.empty() ? "1" : "node = " + ClickHouseQuote(node);
  // Sessions (newest row of each) joined with their events' extent.
  std::string sql =
      "SELECT node, spool, id, kind, wall_start_ns, wall_stop_ns, last_wall_ns, events FROM "
      "(SELECT node, spool, id, argMax(kind, batch) AS kind, argMax(wall_start_ns, batch) AS "
      "wall_start_ns, argMax(wall_stop_ns, batch) AS wall_stop_ns FROM " + db +
      ".gw_sessions WHERE " + where + " GROUP BY node, spool, id) ANY INNER JOIN "
      "(SELECT node, spool, session AS id, max(wall_ns) AS last_wall_ns, count() AS events "
      "FROM " + db + ".gw_events WHERE " + where + " GROUP BY node, spool, session) "
      "USING (node, spool, id) WHERE last_wall_ns >= " + std::to_string(since_wall_ns) +
      " ORDER BY wall_start_ns DESC FORMAT TabSeparated";
  ASSIGN_OR_RETURN(std::string body, client.Query(sql));
  std::vector<RemoteSession> out;
  for (const TsvRow& r : ParseTsv(body)) {
    RemoteSession s;
    s.node = Text(r, 0);
    s.spool = std::strtoull(Text(r, 1).c_str(), nullptr, 10);
    s.id = Int(r, 2);
    s.kind = Text(r, 3);
    s.wall_start_ns = Int(r, 4);
    int64_t stop = Int(r, 5);
    s.wall_stop_ns = stop == kNull ? 0 : stop;
    s.last_wall_ns = Int(r, 6);
    s.events = Int(r, 7);
    out.push_back(std::move(s));
  }
  return out;
}

StatusOr<ImportResult> ImportRemoteSession(const ClickHouseClient& client,
                                           const ImportRequest& request,
                                           const std::string& db_path,
                                           const std::function<void(int64_t)>& progress) {
  ASSIGN_OR_RETURN(std::vector<RemoteSession> sessions,
                   ListRemoteSessions(client, request.node, 0));
  const RemoteSession* pick = nullptr;
  for (const RemoteSession& s : sessions) {
    if (request.session == 0 || s.id == request.session) {
      pick = &s;
      break;
    }
  }
  if (pick == nullptr) {
    std::string known;
    for (const RemoteSession& s : sessions) known += (known.empty() ? "" : ", ") + std::to_string(s.id);
    if (sessions.empty()) {
      return NotFound("ClickHouse at " + client.url().Display() + " has no recording of node '" +
                      request.node + "' — hint: `gpuwhy fleet --clickhouse URL` lists the nodes");
    }
    return NotFound("node '" + request.node + "' has no session " +
                    std::to_string(request.session) + " in ClickHouse (sessions: " + known + ")");
  }
  return ImportRemoteSession(client, *pick, request.since_ns, db_path, progress);
}

StatusOr<ImportResult> ImportRemoteSession(const ClickHouseClient& client,
                                           const RemoteSession& session,
                                           std::optional<int64_t> since_ns,
                                           const std::string& db_path,
                                           const std::function<void(int64_t)>& progress) {
  const std::string& db = client.url().database;
  const RemoteSession* pick = &session;
  ImportResult result;
  result.session = session;
  std::string of_session = " WHERE node = " + ClickHouseQuote(pick->node) +
                           " AND spool = " + std::to_string(pick->spool) +
                           " AND session = " + std::to_string(pick->id);

  // A database made by an older gpuwhy that no newer sink has written to lacks the newest
  // columns (schema.cc kAdded): they read as NULL, as from an older file.
  ASSIGN_OR_RETURN(std::set<std::string> session_columns, ColumnsOf(client, "gw_sessions"));
  std::string profile_hz =
      session_columns.count("profile_hz") > 0 ? "argMax(profile_hz, batch)" : "NULL";
  // The session row (newest version).
  ASSIGN_OR_RETURN(
      std::string srow,
      client.Query(std::string("SELECT argMax(kind, batch), argMax(wall_start_ns, batch), "
                   "argMax(mono_start_ns, batch), argMax(host, batch), argMax(kernel, batch), "
                   "argMax(cpu_model, batch), argMax(cores, batch), argMax(mem_bytes, batch), "
                   "argMax(gpu_model, batch), argMax(gpu_driver, batch), argMax(version, batch), "
                   "argMax(command_line, batch), argMax(tracer_pid, batch), "
                   "argMax(wall_stop_ns, batch), argMax(events, batch), argMax(drops, batch), "
                   "argMax(drops_detail, batch), argMax(launch_duty, batch), ") +
                   profile_hz + " FROM " + db +
                   ".gw_sessions WHERE node = " +
                   ClickHouseQuote(pick->node) + " AND spool = " + std::to_string(pick->spool) +
                   " AND id = " + std::to_string(pick->id) + " FORMAT TabSeparated"));
  std::vector<TsvRow> srows = ParseTsv(srow);
  if (srows.empty()) return NotFound("session row vanished from ClickHouse");
  const TsvRow& s = srows[0];
  SessionInfo info;
  info.kind = Text(s, 0);
  info.wall_start_ns = Int(s, 1);
  info.mono_start_ns = Int(s, 2);
  info.host = Text(s, 3);
  info.kernel = Text(s, 4);
  info.cpu_model = Text(s, 5);
  info.cores = Int(s, 6);
  info.mem_bytes = Int(s, 7);
  info.gpu_model = Text(s, 8);
  info.gpu_driver = Text(s, 9);
  info.version = Text(s, 10);
  info.command_line = Text(s, 11);
  // The node's tracer pid: explain never counts the tracer as a competitor. The scratch file
  // lives only as long as the command that reads it.
  int64_t tracer_pid = Int(s, 12);
  info.tracer_pid = tracer_pid == kNull ? 0 : static_cast<int32_t>(tracer_pid);
  // Launches counted one second in N on the node: the replay scales them the same way.
  int64_t duty = Int(s, 17);
  info.launch_duty = duty == kNull || duty < 1 ? 1 : static_cast<int32_t>(duty);
  // The on-CPU profile's rate: its cpu_sample rows replay as they were recorded.
  int64_t hz = Int(s, 18);
  info.profile_hz = hz == kNull || hz < 0 ? 0 : static_cast<int32_t>(hz);

  ASSIGN_OR_RETURN(std::unique_ptr<StoreWriter> writer, StoreWriter::Create(db_path, {}));
  ASSIGN_OR_RETURN(int64_t local_session, writer->BeginSession(info));
  (void)local_session;
  Names names(writer.get());

  // Events in time pages (a page is one query; its size adapts to about 200k rows).
  ASSIGN_OR_RETURN(std::string extent,
                   client.Query("SELECT min(ts), max(ts) FROM " + db + ".gw_events" + of_session +
                                " FORMAT TabSeparated"));
  std::vector<TsvRow> ext = ParseTsv(extent);
  int64_t lo = ext.empty() ? 0 : Int(ext[0], 0);
  int64_t hi = ext.empty() ? -1 : Int(ext[0], 1);
  if (since_ns && hi >= 0) {
    lo = std::max(lo, hi - *since_ns - int64_t{60'000'000'000});
  }
  ASSIGN_OR_RETURN(std::set<std::string> present, ColumnsOf(client, "gw_events"));
#define GW_CH_COLUMN_NAME_(column, since, nullable, ch_column, ch_type) #ch_column,
  static constexpr const char* kColumns[] = {GW_EVENT_COLUMNS(GW_CH_COLUMN_NAME_)};
#undef GW_CH_COLUMN_NAME_
  std::string select = "SELECT ts";
  for (const char* c : kColumns) select += std::string(", ") + (present.count(c) ? c : "NULL");
  int64_t page_ns = 10'000'000'000;
  std::vector<Event> batch;
  for (int64_t from = lo; hi >= 0 && from <= hi;) {
    int64_t to = from + page_ns;
    StatusOr<std::string> body =
        client.Query(select + " FROM " + db + ".gw_events" +
                         of_session + " AND ts >= " + std::to_string(from) + " AND ts < " +
                         std::to_string(to) + " FORMAT TabSeparated",
                     "", 120000);
    // A page longer than a query may answer is read again in shorter pages.
    if (!body.ok() && body.status().code() == StatusCode::kFailedPrecondition &&
        page_ns > kMinPageNs) {
      page_ns = std::max<int64_t>(page_ns / 4, kMinPageNs);
      continue;
    }
    if (!body.ok()) return body.status();
    std::vector<TsvRow> rows = ParseTsv(*body);
    batch.clear();
    for (const TsvRow& r : rows) {
      std::optional<Op> op = OpFromName(Text(r, 1 + kEventColumn_op));
      if (!op) continue;  // an op this gpuwhy does not know (a newer sender)
      Event e;
      e.ts_ns = Int(r, 0);
      ForEachEventColumn(e, [&](int i, auto& field) {
        if (i != kEventColumn_op) field = static_cast<std::decay_t<decltype(field)>>(Int(r, 1 + i));
      });
      e.op = *op;
      e.name_id = names.Id(r, 1 + kEventColumn_name_id);  // gw_events holds the text
      batch.push_back(e);
    }
    writer->AppendEvents(batch.data(), batch.size());
    result.events += static_cast<int64_t>(batch.size());
    if (progress) progress(result.events);
    from = to;
    if (rows.size() > 400000) page_ns = std::max<int64_t>(page_ns / 2, kMinPageNs);
    if (rows.size() < 100000) page_ns = std::min<int64_t>(page_ns * 2, 600'000'000'000);
  }

  // Processes: every update in the order the writer merged them.
  ASSIGN_OR_RETURN(std::string pbody,
                   client.Query("SELECT pid, ppid, name, comm, cmdline, first_ts, exit_ts, "
                                "exit_code, tracked FROM " + db + ".gw_processes" + of_session +
                                " ORDER BY batch, n FORMAT TabSeparated"));
  std::unordered_map<int32_t, bool> distinct_pids;
  for (const TsvRow& r : ParseTsv(pbody)) {
    ProcessInfo p;
    p.pid = static_cast<int32_t>(Int(r, 0));
    p.ppid = static_cast<int32_t>(std::max<int64_t>(0, Int(r, 1)));
    p.name = Text(r, 2);
    p.comm = Text(r, 3);
    p.cmdline = Text(r, 4);
    p.first_ts_ns = Int(r, 5);
    p.exit_ts_ns = Int(r, 6);
    p.exit_code = Int(r, 7);
    p.tracked = Int(r, 8) == 1;
    writer->UpsertProcess(p);
    if (distinct_pids.emplace(p.pid, true).second) ++result.processes;
  }

  ASSIGN_OR_RETURN(std::string snap,
                   client.Query("SELECT ts, wall_ns, cpu_pct, mem_pct, load1, cores, "
                                "swap_used_bytes, mem_available_bytes, major_faults_per_s, "
                                "ctx_switches_per_s, procs_running, procs_blocked, iowait_pct "
                                "FROM " + db + ".gw_snapshots" + of_session +
                                " ORDER BY ts FORMAT TabSeparated"));
  for (const TsvRow& r : ParseTsv(snap)) {
    SystemSnapshot x;
    x.ts_ns = Int(r, 0);
    x.wall_ns = Int(r, 1);
    x.cpu_pct = Real(r, 2, 0);
    x.mem_pct = Real(r, 3, 0);
    x.load1 = Real(r, 4, 0);
    x.cores = Int(r, 5);
    x.swap_used_bytes = Int(r, 6);
    x.mem_available_bytes = Int(r, 7);
    x.major_faults_per_s = Int(r, 8);
    x.ctx_switches_per_s = Int(r, 9);
    x.procs_running = Int(r, 10);
    x.procs_blocked = Int(r, 11);
    x.iowait_pct = Real(r, 12, 0);
    writer->AppendSnapshot(x);
  }

  ASSIGN_OR_RETURN(std::string counts,
                   client.Query("SELECT sec, pid, op, name, count, total_ns, max_ns FROM " + db +
                                ".gw_op_counts" + of_session + " FORMAT TabSeparated"));
  std::vector<OpCount> op_counts;
  for (const TsvRow& r : ParseTsv(counts)) {
    std::optional<Op> op = OpFromName(Text(r, 2));
    if (!op) continue;
    OpCount c;
    c.sec = Int(r, 0);
    c.pid = static_cast<int32_t>(Int(r, 1));
    c.op = *op;
    c.name_id = names.Id(r, 3);
    c.count = Int(r, 4);
    c.total_ns = Int(r, 5);
    c.max_ns = Int(r, 6);
    op_counts.push_back(c);
  }
  if (!op_counts.empty()) writer->AppendOpCounts(op_counts);

  ASSIGN_OR_RETURN(std::string stacks,
                   client.Query("SELECT id, argMax(pid, batch), argMax(location, batch), "
                                "argMax(frames, batch) FROM " + db + ".gw_stacks" + of_session +
                                " GROUP BY id FORMAT TabSeparated"));
  for (const TsvRow& r : ParseTsv(stacks)) {
    writer->AppendStack(Int(r, 0), static_cast<int32_t>(Int(r, 1)), Text(r, 2), Text(r, 3));
  }

  ASSIGN_OR_RETURN(std::string devices,
                   client.Query("SELECT gpu, argMax(name, batch), argMax(gpm_supported, batch) "
                                "FROM " + db + ".gw_gpu_devices" + of_session +
                                " GROUP BY gpu ORDER BY gpu FORMAT TabSeparated"));
  std::vector<GpuDevice> gpus;
  for (const TsvRow& r : ParseTsv(devices)) {
    GpuDevice d;
    d.gpu = static_cast<int32_t>(Int(r, 0));
    d.name = Text(r, 1);
    d.gpm_supported = Int(r, 2) == 1;
    gpus.push_back(d);
  }
  if (!gpus.empty()) writer->AppendGpuDevices(gpus);
  ASSIGN_OR_RETURN(std::string gsamples,
                   client.Query("SELECT ts, gpu, util_pct, mem_util_pct, sm_active_pct, "
                                "sm_occupancy_pct, tensor_active_pct, dram_bw_pct, sm_clock_mhz, "
                                "power_mw, throttle_reasons, mem_used_bytes FROM " + db +
                                ".gw_gpu_samples" + of_session + " ORDER BY ts FORMAT TabSeparated"));
  std::vector<GpuSample> samples;
  for (const TsvRow& r : ParseTsv(gsamples)) {
    GpuSample x;
    x.ts_ns = Int(r, 0);
    x.gpu = static_cast<int32_t>(Int(r, 1));
    x.util_pct = Int(r, 2);
    x.mem_util_pct = Int(r, 3);
    x.sm_active_pct = Real(r, 4, -1);
    x.sm_occupancy_pct = Real(r, 5, -1);
    x.tensor_active_pct = Real(r, 6, -1);
    x.dram_bw_pct = Real(r, 7, -1);
    x.sm_clock_mhz = Int(r, 8);
    x.power_mw = Int(r, 9);
    x.throttle_reasons = Int(r, 10);
    x.mem_used_bytes = Int(r, 11);
    samples.push_back(x);
  }
  ASSIGN_OR_RETURN(std::string gproc,
                   client.Query("SELECT ts, gpu, pid, sm_util_pct, mem_util_pct FROM " + db +
                                ".gw_gpu_process_samples" + of_session +
                                " ORDER BY ts FORMAT TabSeparated"));
  std::vector<GpuProcessSample> gprocs;
  for (const TsvRow& r : ParseTsv(gproc)) {
    GpuProcessSample x;
    x.ts_ns = Int(r, 0);
    x.gpu = static_cast<int32_t>(Int(r, 1));
    x.pid = static_cast<int32_t>(Int(r, 2));
    x.sm_util_pct = Int(r, 3);
    x.mem_util_pct = Int(r, 4);
    gprocs.push_back(x);
  }
  if (!samples.empty() || !gprocs.empty()) writer->AppendGpuSamples(samples, gprocs);

  // Schema 12's cgroup rows (docs/containers.md), where this database has their tables (one
  // made by an older gpuwhy has none until a newer sink connects).
  ASSIGN_OR_RETURN(
      std::string cgroup_tables,
      client.Query("SELECT count() FROM system.tables WHERE database = " + ClickHouseQuote(db) +
                   " AND name IN ('gw_process_cgroups', 'gw_cgroup_cpu_samples', "
                   "'gw_cgroup_memory_samples') FORMAT TabSeparated"));
  if (!cgroup_tables.empty() && cgroup_tables[0] == '3') {
    ASSIGN_OR_RETURN(std::string pc_text,
                     client.Query("SELECT pid, ts, cgroup, container_id, pod_uid, runtime, "
                                  "ns_pid, pod_name, pod_namespace FROM " +
                                  db + ".gw_process_cgroups" + of_session +
                                  " ORDER BY pid, ts FORMAT TabSeparated"));
    std::vector<ProcessCgroup> pcs;
    for (const TsvRow& r : ParseTsv(pc_text)) {
      ProcessCgroup x;
      x.pid = static_cast<int32_t>(Int(r, 0));
      x.ts_ns = Int(r, 1);
      x.cgroup = Text(r, 2);
      x.container_id = Text(r, 3);
      x.pod_uid = Text(r, 4);
      x.runtime = Text(r, 5);
      int64_t ns = Int(r, 6);
      x.ns_pid = ns == kNull ? 0 : static_cast<int32_t>(ns);
      x.pod_name = Text(r, 7);
      x.pod_namespace = Text(r, 8);
      pcs.push_back(std::move(x));
    }
    ASSIGN_OR_RETURN(std::string cpu_text,
                     client.Query("SELECT ts, cgroup, version, quota_us, period_us, nr_periods, "
                                  "nr_throttled, throttled_ns, usage_ns FROM " +
                                  db + ".gw_cgroup_cpu_samples" + of_session +
                                  " ORDER BY ts FORMAT TabSeparated"));
    std::vector<CgroupCpuSample> cpus;
    for (const TsvRow& r : ParseTsv(cpu_text)) {
      CgroupCpuSample x;
      x.ts_ns = Int(r, 0);
      x.cgroup = Text(r, 1);
      x.version = static_cast<int32_t>(Int(r, 2));
      x.quota_us = Int(r, 3);
      x.period_us = Int(r, 4);
      x.nr_periods = Int(r, 5);
      x.nr_throttled = Int(r, 6);
      x.throttled_ns = Int(r, 7);
      x.usage_ns = Int(r, 8);
      cpus.push_back(std::move(x));
    }
    ASSIGN_OR_RETURN(std::string mem_text,
                     client.Query("SELECT ts, cgroup, version, max_bytes, high_bytes, "
                                  "usage_bytes, events_high, events_max, events_oom, "
                                  "events_oom_kill, major_faults FROM " +
                                  db + ".gw_cgroup_memory_samples" + of_session +
                                  " ORDER BY ts FORMAT TabSeparated"));
    std::vector<CgroupMemorySample> mems;
    for (const TsvRow& r : ParseTsv(mem_text)) {
      CgroupMemorySample x;
      x.ts_ns = Int(r, 0);
      x.cgroup = Text(r, 1);
      x.version = static_cast<int32_t>(Int(r, 2));
      x.max_bytes = Int(r, 3);
      x.high_bytes = Int(r, 4);
      x.usage_bytes = Int(r, 5);
      x.events_high = Int(r, 6);
      x.events_max = Int(r, 7);
      x.events_oom = Int(r, 8);
      x.events_oom_kill = Int(r, 9);
      x.major_faults = Int(r, 10);
      mems.push_back(std::move(x));
    }
    if (!pcs.empty() || !cpus.empty() || !mems.empty()) {
      writer->AppendCgroupSamples(std::move(cpus), std::move(pcs), std::move(mems));
    }
  }

  if (Int(s, 13) != kNull) {
    SessionTotals totals;
    totals.wall_stop_ns = Int(s, 13);
    totals.events = Int(s, 14) == kNull ? 0 : Int(s, 14);
    totals.drops = Int(s, 15) == kNull ? 0 : Int(s, 15);
    totals.drops_detail = Text(s, 16);
    RETURN_IF_ERROR(writer->EndSession(totals));
  } else {
    RETURN_IF_ERROR(writer->Flush());
  }
  RETURN_IF_ERROR(writer->Close());
  return result;
}

StatusOr<ScratchDir> ScratchDir::Create() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/gpuwhy-import-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) return ErrnoStatus("mkdtemp " + pattern, errno);
  return ScratchDir(pattern);
}

ScratchDir::~ScratchDir() {
  if (path_.empty()) return;
  if (DIR* d = opendir(path_.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      unlink((path_ + "/" + name).c_str());
    }
    closedir(d);
  }
  rmdir(path_.c_str());
}

}  // namespace gw
