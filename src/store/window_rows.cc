#include "store/window_rows.h"

#include <algorithm>
#include <limits>

#include "store/reader.h"
#include "store/row_columns.h"

namespace gw {

namespace {

StatusOr<int64_t> SingleInt(StoreReader& reader, const std::string& sql,
                            const std::vector<int64_t>& params, int64_t if_null) {
  int64_t value = if_null;
  RETURN_IF_ERROR(reader.ForEach(sql, params, [&](sqlite3_stmt* s) {
    if (sqlite3_column_type(s, 0) != SQLITE_NULL) value = sqlite3_column_int64(s, 0);
  }));
  return value;
}

// A row of "SELECT ts, <EventColumnsSql>"; an op this gpuwhy does not know reads as kRead.
Event ReadRawEvent(sqlite3_stmt* s) {
  Event e;
  e.ts_ns = sqlite3_column_int64(s, 0);
  ReadEventColumns(s, 1, &e);
  e.op = OpFromId(static_cast<int64_t>(e.op)).value_or(Op::kRead);
  return e;
}

}  // namespace

Status ReadProcesses(StoreReader& reader, int64_t session, std::map<int32_t, ProcessRecord>* out) {
  RETURN_IF_ERROR(reader.ForEach(
      "SELECT pid, COALESCE(ppid, 0), name, COALESCE(cmdline, ''), tracked, first_ts, exit_ts, "
      "exit_code FROM processes WHERE session = ?1",
      {session}, [&](sqlite3_stmt* s) {
        ProcessRecord p;
        p.pid = static_cast<int32_t>(sqlite3_column_int64(s, 0));
        p.ppid = static_cast<int32_t>(sqlite3_column_int64(s, 1));
        p.name = ColLine(s, 2);
        p.cmdline = ColLine(s, 3);
        p.tracked = sqlite3_column_int64(s, 4) != 0;
        p.first_ts = ColInt(s, 5);
        p.exit_ts = ColInt(s, 6);
        p.exit_code = ColInt(s, 7);
        (*out)[p.pid] = std::move(p);
      }));
  ASSIGN_OR_RETURN(int64_t version, reader.SchemaVersion());
  if (version < 12) return Status::Ok();
  // Rows by ts: the last one of a pid is where it was seen last.
  return reader.ForEach(
      "SELECT pid, container_id, pod_uid, ns_pid FROM process_cgroups WHERE session = ?1 ORDER "
      "BY pid, ts",
      {session}, [&](sqlite3_stmt* s) {
        auto it = out->find(static_cast<int32_t>(sqlite3_column_int64(s, 0)));
        if (it == out->end()) return;
        it->second.container_id = ColLine(s, 1);
        it->second.pod_uid = ColLine(s, 2);
        int64_t ns = ColInt(s, 3);
        it->second.ns_pid = ns == kNull ? 0 : static_cast<int32_t>(ns);
      });
}

StatusOr<int64_t> ReadLaunchDuty(StoreReader& reader, int64_t session) {
  ASSIGN_OR_RETURN(int64_t version, reader.SchemaVersion());
  int64_t duty = 1;
  if (version >= 6) {
    RETURN_IF_ERROR(reader.ForEach(
        "SELECT COALESCE(launch_duty, 1) FROM sessions WHERE id = ?1", {session},
        [&](sqlite3_stmt* s) { duty = std::max<int64_t>(1, sqlite3_column_int64(s, 0)); }));
  }
  return duty;
}

StatusOr<KernelLaunches> ReadKernelLaunches(StoreReader& reader, const SessionWindow& window,
                                            int64_t max_rows, int32_t pid) {
  KernelLaunches k;
  ASSIGN_OR_RETURN(int64_t version, reader.SchemaVersion());
  if (version >= 5) {
    RETURN_IF_ERROR(reader.ForEach(
        "SELECT COALESCE(launches_once, 0) FROM sessions WHERE id = ?1", {window.session},
        [&](sqlite3_stmt* s) { k.launches_once = sqlite3_column_int64(s, 0) != 0; }));
  }
  ASSIGN_OR_RETURN(k.estimates, ReadLaunchEstimates(reader, window, pid));
  k.launch_duty = k.estimates.duty;
  RETURN_IF_ERROR(reader.ForEach(
      std::string("SELECT q.pid, q.op, COALESCE(s.text, ''), SUM(q.count) FROM op_seconds q "
                  "LEFT JOIN strings s ON s.id = q.name_id WHERE q.session = ?1 AND q.sec >= ?2 "
                  "AND q.sec <= ?3 AND (?5 = 0 OR q.pid = ?5) AND q.op IN (") +
          kKernelRunOpList + ") GROUP BY q.pid, q.op, q.name_id ORDER BY 4 DESC LIMIT ?4",
      {window.session, window.begin_ns / 1'000'000'000, (window.end_ns - 1) / 1'000'000'000,
       max_rows, pid},
      [&](sqlite3_stmt* s) {
        std::optional<Op> op = OpFromId(sqlite3_column_int64(s, 1));
        if (!op) return;
        KernelLaunchRow r;
        r.pid = static_cast<int32_t>(sqlite3_column_int64(s, 0));
        r.op = *op;
        r.name = ColLine(s, 2);
        r.launches = sqlite3_column_int64(s, 3);
        k.rows.push_back(std::move(r));
      }));
  return k;
}

Status ReadGpuSamples(StoreReader& reader, int64_t session, int64_t begin_ns, int64_t end_ns,
                      std::vector<GpuDevice>* devices, std::vector<GpuSample>* samples) {
  RETURN_IF_ERROR(reader.ForEach(
      "SELECT gpu, COALESCE(name, ''), gpm_supported FROM gpu_devices WHERE session = ?1 "
      "ORDER BY gpu",
      {session}, [&](sqlite3_stmt* s) {
        GpuDevice d;
        d.gpu = static_cast<int32_t>(sqlite3_column_int64(s, 0));
        d.name = ColLine(s, 1);
        d.gpm_supported = sqlite3_column_int64(s, 2) != 0;
        devices->push_back(std::move(d));
      }));
  auto opt_pct = [](sqlite3_stmt* s, int i) {
    return sqlite3_column_type(s, i) == SQLITE_NULL ? -1.0 : sqlite3_column_double(s, i);
  };
  return reader.ForEach(
      "SELECT ts, gpu, util_pct, mem_util_pct, sm_active_pct, sm_occupancy_pct, "
      "tensor_active_pct, dram_bw_pct, sm_clock_mhz, power_mw, throttle_reasons, "
      "mem_used_bytes FROM gpu_samples WHERE session = ?1 AND ts >= ?2 AND ts < ?3 "
      "ORDER BY ts, gpu",
      {session, begin_ns, end_ns}, [&](sqlite3_stmt* s) {
        GpuSample x;
        x.ts_ns = sqlite3_column_int64(s, 0);
        x.gpu = static_cast<int32_t>(sqlite3_column_int64(s, 1));
        x.util_pct = ColInt(s, 2);
        x.mem_util_pct = ColInt(s, 3);
        x.sm_active_pct = opt_pct(s, 4);
        x.sm_occupancy_pct = opt_pct(s, 5);
        x.tensor_active_pct = opt_pct(s, 6);
        x.dram_bw_pct = opt_pct(s, 7);
        x.sm_clock_mhz = ColInt(s, 8);
        x.power_mw = ColInt(s, 9);
        x.throttle_reasons = ColInt(s, 10);
        x.mem_used_bytes = ColInt(s, 11);
        samples->push_back(x);
      });
}

StatusOr<int64_t> ReadFirstCudaCall(StoreReader& reader, int64_t session) {
  const std::string cuda =
      OpSqlList([](Op op) { return OpLayer(op) != Layer::kHost; }, OpListForm::kIds);
  // op_seconds counts every call (launches too, rows or not): its first second with a CUDA op,
  // then the first CUDA row of that second; the second's start when it holds none (launches
  // counted without rows).
  ASSIGN_OR_RETURN(int64_t sec,
                   SingleInt(reader,
                             "SELECT MIN(sec) FROM op_seconds WHERE session = ?1 AND op IN (" +
                                 cuda + ")",
                             {session}, kNull));
  if (sec == kNull) return kNull;
  const int64_t from = SaturatingMul(sec, 1'000'000'000);
  return SingleInt(reader,
                   "SELECT MIN(ts) FROM event_rows WHERE session = ?1 AND ts >= ?2 AND ts < ?3 "
                   "AND op IN (" +
                       cuda + ")",
                   {session, from, SaturatingAdd(from, 1'000'000'000)}, from);
}

std::string SwitchTotalsSql(bool wakers) {
  // Grouped by (pid, waker) first, so that each group looks its process's parent up once, not
  // each row. A sleep the parent ended is a wait for work; a stall is the longest interval that
  // began at or after the job's start and was not one.
  return std::string(
             "SELECT g.pid AS pid, SUM(g.n) AS switches, SUM(g.off_ns) AS off_ns, "
             "SUM(g.runq_ns) AS runq_ns, MAX(g.max_ns) AS max_ns, "
             "MAX(CASE WHEN g.waker = p.ppid THEN 0 ELSE g.late_max_ns END) AS stall_max_ns, "
             "SUM(CASE WHEN g.waker = p.ppid THEN g.off_ns ELSE 0 END) AS idle_ns, "
             "SUM(g.preempted) AS preempted FROM (SELECT pid, ") +
         (wakers ? "waker_pid" : "NULL") +
         " AS waker, COUNT(*) AS n, SUM(duration_ns) AS off_ns, "
         "SUM(COALESCE(runq_ns, 0)) AS runq_ns, MAX(duration_ns) AS max_ns, "
         "MAX(CASE WHEN ts >= ?4 THEN duration_ns ELSE 0 END) AS late_max_ns, "
         "SUM(CASE WHEN kind = 0 THEN 1 ELSE 0 END) AS preempted "
         "FROM event_rows WHERE session = ?1 AND op = 200 AND ts >= ?2 AND ts < ?3 "
         "GROUP BY pid, waker) g "
         "LEFT JOIN processes p ON p.session = ?1 AND p.pid = g.pid AND p.ppid > 0 "
         "GROUP BY g.pid";
}

StatusOr<WindowRows> ReadWindowRows(StoreReader& reader, const SessionWindow& window,
                                    const WindowRowsOptions& options) {
  WindowRows w;
  const int64_t session = window.session;
  bool found = false;
  // Schema 3 added sessions.tracer_pid and the waker columns.
  ASSIGN_OR_RETURN(int64_t version, reader.SchemaVersion());
  bool v3 = version >= 3;
  RETURN_IF_ERROR(reader.ForEach(std::string("SELECT COALESCE(cores, 0), drops, ") +
                                     (v3 ? "COALESCE(tracer_pid, 0)" : "0") +
                                     " FROM sessions WHERE id = ?1",
                                 {session}, [&](sqlite3_stmt* s) {
                                   found = true;
                                   w.cores = sqlite3_column_int64(s, 0);
                                   w.drops = sqlite3_column_int64(s, 1);
                                   w.tracer_pid = static_cast<int32_t>(sqlite3_column_int64(s, 2));
                                 }));
  if (!found) {
    return NotFound("session " + std::to_string(session) + " is not in " + reader.path() +
                    " — hint: `gpuwhy query \"SELECT id, kind, events FROM sessions\"` lists "
                    "them");
  }
  const std::string raw_columns = "ts, " + EventColumnsSql(version, "");
  const std::vector<int64_t> range = {session, window.begin_ns, window.end_ns};

  RETURN_IF_ERROR(ReadProcesses(reader, session, &w.processes));

  // Tracked processes' rows (launches excluded), plus OOM kills of any process.
  RETURN_IF_ERROR(reader.ForEach(
      "SELECT " + raw_columns +
          " FROM event_rows WHERE session = ?1 AND ts >= ?2 AND ts < ?3 AND op NOT IN (" +
          kLaunchOpList + "," + std::to_string(static_cast<int>(Op::kCpuSample)) + "," +
          std::to_string(static_cast<int>(Op::kGraphNode)) +
          ") AND (pid IN (SELECT pid FROM processes WHERE session = ?1 AND tracked = 1) "
          "OR op = 210) ORDER BY ts",
      range, [&](sqlite3_stmt* s) { w.events.push_back(ReadRawEvent(s)); }));
  // Intervals that began before the window and end inside it (sleeps, syncs, copies).
  RETURN_IF_ERROR(reader.ForEach(
      "SELECT " + raw_columns +
          " FROM event_rows WHERE session = ?1 AND ts >= ?2 AND ts < ?3 AND ts + duration_ns > ?3 "
          "AND op IN (10, 11, 12, 13, 14, 15, 18, 19, 20, 104, 105, 106, 107, 108, 109, 110, 111, "
          "112, 113, 114, 200) AND pid IN (SELECT pid FROM processes WHERE session = ?1 AND "
          "tracked = 1) ORDER BY ts",
      {session, SaturatingSub(window.begin_ns, options.carry_in_ns), window.begin_ns},
      [&](sqlite3_stmt* s) { w.carry_in.push_back(ReadRawEvent(s)); }));

  RETURN_IF_ERROR(
      reader.ForEach("SELECT " + raw_columns + " FROM event_rows WHERE session = ?1 AND op IN (" +
                         kLaunchOpList + ") AND ts >= ?2 AND ts < ?3 LIMIT ?4",
                     {session, window.begin_ns, window.end_ns, options.max_launch_samples},
                     [&](sqlite3_stmt* s) { w.launch_samples.push_back(ReadRawEvent(s)); }));

  ASSIGN_OR_RETURN(KernelLaunches kernels,
                   ReadKernelLaunches(reader, window, options.max_kernel_rows, 0));
  w.kernel_launches = std::move(kernels.rows);
  w.launches_once = kernels.launches_once;
  w.launch_duty = kernels.launch_duty;
  w.launch_estimates = kernels.estimates;

  RETURN_IF_ERROR(reader.ForEach(
      "SELECT q.pid, q.op, s.text, SUM(q.count), SUM(q.total_ns), SUM(COALESCE(q.bytes, 0)) "
      "FROM op_seconds q JOIN strings s ON s.id = q.name_id WHERE q.session = ?1 AND q.sec >= ?2 "
      "AND q.sec <= ?3 AND q.name_id != 0 AND q.op IN (" +
          OpSqlList(IsMemcpy, OpListForm::kIds) + ") GROUP BY 1, 2, 3",
      {session, window.begin_ns / 1'000'000'000, (window.end_ns - 1) / 1'000'000'000},
      [&](sqlite3_stmt* s) {
        std::optional<Op> op = OpFromId(sqlite3_column_int64(s, 1));
        if (!op) return;
        CopyAggregateRow r;
        r.pid = static_cast<int32_t>(sqlite3_column_int64(s, 0));
        r.op = *op;
        r.direction = ColText(s, 2);
        r.count = sqlite3_column_int64(s, 3);
        r.total_ns = sqlite3_column_int64(s, 4);
        r.bytes = sqlite3_column_int64(s, 5);
        w.copy_aggregates.push_back(std::move(r));
      }));

  RETURN_IF_ERROR(reader.ForEach(
      "SELECT sec, pid, op, SUM(count), SUM(total_ns), MAX(max_ns) FROM op_seconds "
      "WHERE session = ?1 AND sec >= ?2 AND sec <= ?3 GROUP BY sec, pid, op ORDER BY sec",
      {session, window.begin_ns / 1'000'000'000, (window.end_ns - 1) / 1'000'000'000},
      [&](sqlite3_stmt* s) {
        std::optional<Op> op = OpFromId(sqlite3_column_int64(s, 2));
        if (!op) return;
        OpSecondRow r;
        r.sec = sqlite3_column_int64(s, 0);
        r.pid = static_cast<int32_t>(sqlite3_column_int64(s, 1));
        r.op = *op;
        r.count = sqlite3_column_int64(s, 3);
        r.total_ns = sqlite3_column_int64(s, 4);
        r.max_ns = sqlite3_column_int64(s, 5);
        w.op_seconds.push_back(r);
      }));

  ASSIGN_OR_RETURN(int64_t job_start, ReadFirstCudaCall(reader, session));
  RETURN_IF_ERROR(reader.ForEach(
      SwitchTotalsSql(v3),
      {session, window.begin_ns, window.end_ns,
       job_start == kNull ? std::numeric_limits<int64_t>::min() : job_start},
      [&](sqlite3_stmt* s) {
        SwitchTotals t;
        t.pid = static_cast<int32_t>(sqlite3_column_int64(s, 0));
        t.count = sqlite3_column_int64(s, 1);
        t.off_ns = sqlite3_column_int64(s, 2);
        t.runq_ns = sqlite3_column_int64(s, 3);
        t.max_ns = sqlite3_column_int64(s, 4);
        t.stall_max_ns = sqlite3_column_int64(s, 5);
        t.idle_ns = sqlite3_column_int64(s, 6);
        w.switch_totals.push_back(t);
      }));

  RETURN_IF_ERROR(reader.ForEach(
      "SELECT ts, COALESCE(cpu_pct, 0), COALESCE(mem_pct, 0), COALESCE(load1, 0), "
      "COALESCE(cores, 0), COALESCE(swap_used_bytes, 0), COALESCE(mem_available_bytes, 0), "
      "COALESCE(major_faults_per_s, 0), COALESCE(ctx_switches_per_s, 0), "
      "COALESCE(procs_running, 0), COALESCE(procs_blocked, 0), COALESCE(iowait_pct, 0) "
      "FROM system_snapshots WHERE session = ?1 AND ts >= ?2 AND ts < ?3 ORDER BY ts",
      range, [&](sqlite3_stmt* s) {
        SystemSnapshot x;
        x.ts_ns = sqlite3_column_int64(s, 0);
        x.cpu_pct = sqlite3_column_double(s, 1);
        x.mem_pct = sqlite3_column_double(s, 2);
        x.load1 = sqlite3_column_double(s, 3);
        x.cores = sqlite3_column_int64(s, 4);
        x.swap_used_bytes = sqlite3_column_int64(s, 5);
        x.mem_available_bytes = sqlite3_column_int64(s, 6);
        x.major_faults_per_s = sqlite3_column_int64(s, 7);
        x.ctx_switches_per_s = sqlite3_column_int64(s, 8);
        x.procs_running = sqlite3_column_int64(s, 9);
        x.procs_blocked = sqlite3_column_int64(s, 10);
        x.iowait_pct = sqlite3_column_double(s, 11);
        w.snapshots.push_back(x);
      }));

  if (version >= 11) {
    RETURN_IF_ERROR(reader.ForEach("SELECT COALESCE(profile_hz, 0) FROM sessions WHERE id = ?1",
                                   {session}, [&](sqlite3_stmt* s) {
                                     w.profile_hz = sqlite3_column_int64(s, 0);
                                   }));
  }
  if (w.profile_hz > 0) {
    RETURN_IF_ERROR(reader.ForEach(
        "SELECT ts, pid, tid, COALESCE(stack_id, 0), COALESCE(kind, 0) FROM event_rows WHERE "
        "session = ?1 AND ts >= ?2 AND ts < ?3 AND op = " +
            std::to_string(static_cast<int>(Op::kCpuSample)) + " ORDER BY ts",
        range, [&](sqlite3_stmt* s) {
          CpuSampleRow x;
          x.ts_ns = sqlite3_column_int64(s, 0);
          x.pid = static_cast<int32_t>(sqlite3_column_int64(s, 1));
          x.tid = static_cast<int32_t>(sqlite3_column_int64(s, 2));
          x.stack_id = sqlite3_column_int64(s, 3);
          x.in_kernel = sqlite3_column_int64(s, 4) != 0;
          w.cpu_samples.push_back(x);
        }));
  }

  {
    // NCCL rows of the window, and the communicator inits of the session before it (which ranks
    // a communicator has). The inits are found through op_seconds, so the raw rows read are
    // the seconds that hold one, never the whole session before the window.
    auto read_nccl = [&](const std::string& where, const std::vector<int64_t>& args) {
      return reader.ForEach(
          "SELECT r.ts, r.duration_ns, r.pid, r.tid, r.op, r.ret, r.bytes, r.kind, r.other_pid, "
          "r.addr, COALESCE(s.text, '') FROM event_rows r LEFT JOIN strings s ON s.id = "
          "r.name_id WHERE r.session = ?1 AND r.ts >= ?2 AND r.ts < ?3 AND " +
              where + " ORDER BY r.ts",
          args, [&](sqlite3_stmt* s) {
            NcclCallRow x;
            x.ts = sqlite3_column_int64(s, 0);
            x.duration = sqlite3_column_int64(s, 1);
            x.pid = static_cast<int32_t>(sqlite3_column_int64(s, 2));
            x.tid = static_cast<int32_t>(sqlite3_column_int64(s, 3));
            x.op = OpFromId(sqlite3_column_int64(s, 4)).value_or(Op::kNcclAllReduce);
            x.ret = ColInt(s, 5);
            x.bytes = ColInt(s, 6);
            x.kind = ColInt(s, 7);
            x.seq = ColInt(s, 8);
            x.stream = ColInt(s, 9);
            x.comm = ColLine(s, 10);
            w.nccl_calls.push_back(std::move(x));
          });
    };
    const std::string init = std::to_string(static_cast<int>(Op::kNcclCommInit));
    std::vector<int64_t> init_secs;
    RETURN_IF_ERROR(reader.ForEach(
        "SELECT DISTINCT sec FROM op_seconds WHERE session = ?1 AND op = " + init +
            " AND sec * 1000000000 < ?2 ORDER BY sec",
        {session, window.begin_ns},
        [&](sqlite3_stmt* s) { init_secs.push_back(sqlite3_column_int64(s, 0)); }));
    for (int64_t sec : init_secs) {
      int64_t from = sec * 1'000'000'000;
      RETURN_IF_ERROR(read_nccl("r.op = " + init,
                                {session, from, std::min(from + 1'000'000'000, window.begin_ns)}));
    }
    RETURN_IF_ERROR(read_nccl(
        "r.op BETWEEN " + std::to_string(static_cast<int>(Op::kNcclAllReduce)) + " AND " +
            std::to_string(static_cast<int>(Op::kNcclCommDestroy)),
        range));
  }

  RETURN_IF_ERROR(reader.ForEach(
      "SELECT op, pid, stack_id, COUNT(*), SUM(duration_ns), MAX(duration_ns), "
      "SUM(op = 200 AND kind = 0) FROM event_rows WHERE session = ?1 AND ts >= ?2 AND ts < ?3 "
      "AND stack_id IS NOT NULL GROUP BY op, pid, stack_id",
      range, [&](sqlite3_stmt* s) {
        std::optional<Op> op = OpFromId(sqlite3_column_int64(s, 0));
        if (!op) return;
        StackUse u;
        u.op = *op;
        u.pid = static_cast<int32_t>(sqlite3_column_int64(s, 1));
        u.stack_id = sqlite3_column_int64(s, 2);
        u.count = sqlite3_column_int64(s, 3);
        u.total_ns = sqlite3_column_int64(s, 4);
        u.max_ns = sqlite3_column_int64(s, 5);
        u.preempted = sqlite3_column_int64(s, 6);
        w.stack_uses.push_back(u);
      }));
  if (!w.stack_uses.empty()) {  // a file without stack rows may predate the stacks table
    // A stack whose frames are not valid JSON (an edited or damaged file) is skipped with a
    // note instead of failing the whole explain.
    const std::string used =
        "SELECT DISTINCT stack_id FROM event_rows WHERE session = ?1 AND ts >= ?2 AND ts < ?3 "
        "AND stack_id IS NOT NULL";
    ASSIGN_OR_RETURN(w.malformed_stacks,
                     SingleInt(reader,
                               "SELECT COUNT(*) FROM stacks WHERE session = ?1 AND NOT "
                               "json_valid(frames) AND id IN (" +
                                   used + ")",
                               range, 0));
    RETURN_IF_ERROR(reader.ForEach(
        "SELECT stack_id, kind, COALESCE(function, ''), COALESCE(file, ''), COALESCE(line, 0), "
        "COALESCE(module, '') FROM stack_frames WHERE session = ?1 AND stack_id IN (" +
            used +
            ") AND stack_id IN (SELECT id FROM stacks WHERE session = ?1 AND json_valid(frames)) "
            "ORDER BY stack_id, depth",
        range, [&](sqlite3_stmt* s) {
          StackFrameRow f;
          f.python = ColText(s, 1) == "py";
          f.function = ColLine(s, 2);
          f.file = ColLine(s, 3);
          f.line = sqlite3_column_int64(s, 4);
          f.module = ColLine(s, 5);
          w.stack_frames[sqlite3_column_int64(s, 0)].push_back(std::move(f));
        }));
  }

  if (version >= 4) {
    RETURN_IF_ERROR(ReadGpuSamples(reader, session, window.begin_ns, window.end_ns, &w.gpu_devices,
                                   &w.gpu_samples));
    Status read = reader.ForEach(
        "SELECT ts, gpu, pid, sm_util_pct, mem_util_pct FROM gpu_process_samples WHERE "
        "session = ?1 AND ts >= ?2 AND ts < ?3 ORDER BY ts, gpu, pid",
        {session, window.begin_ns, window.end_ns}, [&](sqlite3_stmt* s) {
          GpuProcessSample x;
          x.ts_ns = sqlite3_column_int64(s, 0);
          x.gpu = static_cast<int32_t>(sqlite3_column_int64(s, 1));
          x.pid = static_cast<int32_t>(sqlite3_column_int64(s, 2));
          x.sm_util_pct = ColInt(s, 3);
          x.mem_util_pct = ColInt(s, 4);
          w.gpu_process_samples.push_back(x);
        });
    if (!read.ok()) return read;
  }

  if (version >= 10) {
    // Counters are cumulative: the sample before the window anchors its first second.
    RETURN_IF_ERROR(reader.ForEach(
        "SELECT ts, cgroup, version, quota_us, period_us, nr_periods, nr_throttled, throttled_ns, "
        "usage_ns FROM cgroup_cpu_samples WHERE session = ?1 AND ts < ?3 AND ts >= COALESCE(("
        "SELECT MAX(ts) FROM cgroup_cpu_samples WHERE session = ?1 AND ts < ?2), ?2) "
        "ORDER BY cgroup, ts",
        {session, window.begin_ns, window.end_ns}, [&](sqlite3_stmt* s) {
          CgroupCpuSample x;
          x.ts_ns = sqlite3_column_int64(s, 0);
          x.cgroup = ColLine(s, 1);
          x.version = static_cast<int32_t>(sqlite3_column_int64(s, 2));
          x.quota_us = ColInt(s, 3);
          x.period_us = ColInt(s, 4);
          x.nr_periods = ColInt(s, 5);
          x.nr_throttled = ColInt(s, 6);
          x.throttled_ns = ColInt(s, 7);
          x.usage_ns = ColInt(s, 8);
          w.cgroup_cpu.push_back(std::move(x));
        }));
    RETURN_IF_ERROR(reader.ForEach(
        version >= 12 ? "SELECT pid, ts, cgroup, container_id, pod_uid, runtime, ns_pid, "
                        "pod_name, pod_namespace FROM process_cgroups WHERE session = ?1 ORDER "
                        "BY pid, ts"
                      : "SELECT pid, ts, cgroup, NULL, NULL, NULL, NULL, NULL, NULL FROM "
                        "process_cgroups WHERE session = ?1 ORDER BY pid, ts",
        {session}, [&](sqlite3_stmt* s) {
          ProcessCgroup x;
          x.pid = static_cast<int32_t>(sqlite3_column_int64(s, 0));
          x.ts_ns = sqlite3_column_int64(s, 1);
          x.cgroup = ColLine(s, 2);
          x.container_id = ColLine(s, 3);
          x.pod_uid = ColLine(s, 4);
          x.runtime = ColLine(s, 5);
          int64_t ns_pid = ColInt(s, 6);
          x.ns_pid = ns_pid == kNull ? 0 : static_cast<int32_t>(ns_pid);
          x.pod_name = ColLine(s, 7);
          x.pod_namespace = ColLine(s, 8);
          w.process_cgroups.push_back(std::move(x));
        }));
  }
  if (version >= 12) {
    RETURN_IF_ERROR(reader.ForEach(
        "SELECT ts, cgroup, version, max_bytes, high_bytes, usage_bytes, events_high, "
        "events_max, events_oom, events_oom_kill, major_faults FROM cgroup_memory_samples "
        "WHERE session = ?1 AND ts < ?3 AND ts >= COALESCE((SELECT MAX(ts) FROM "
        "cgroup_memory_samples WHERE session = ?1 AND ts < ?2), ?2) ORDER BY cgroup, ts",
        {session, window.begin_ns, window.end_ns}, [&](sqlite3_stmt* s) {
          CgroupMemorySample x;
          x.ts_ns = sqlite3_column_int64(s, 0);
          x.cgroup = ColLine(s, 1);
          x.version = static_cast<int32_t>(sqlite3_column_int64(s, 2));
          x.max_bytes = ColInt(s, 3);
          x.high_bytes = ColInt(s, 4);
          x.usage_bytes = ColInt(s, 5);
          x.events_high = ColInt(s, 6);
          x.events_max = ColInt(s, 7);
          x.events_oom = ColInt(s, 8);
          x.events_oom_kill = ColInt(s, 9);
          x.major_faults = ColInt(s, 10);
          w.cgroup_memory.push_back(std::move(x));
        }));
  }

  ASSIGN_OR_RETURN(w.events_in_window,
                   SingleInt(reader,
                             "SELECT COUNT(*) FROM event_rows WHERE session = ?1 AND ts >= ?2 "
                             "AND ts < ?3",
                             range, 0));
  return w;
}

}  // namespace gw
