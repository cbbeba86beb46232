#include "clickhouse/schema.h"

#include <cctype>
#include <cstdio>
#include <utility>

#include "store/event_columns.h"

namespace gw {

namespace {

// node, spool, batch: who sent the row and in which outbox entry (exactly-once bookkeeping).
constexpr char kKey[] = "node String, spool UInt64, batch UInt64, ";
constexpr char kNullInt[] = "Nullable(Int64)";

std::string Table(const std::string& db, const char* name, const std::string& columns,
                  const std::string& engine) {
  return "CREATE TABLE IF NOT EXISTS " + db + ".gw_" + name + " (" + kKey + columns +
         ") ENGINE = " + engine;
}

// Partitions by day of wall-clock time, ordered for a node's time ranges.
std::string ByTime(const std::string& wall_column) {
  return "MergeTree() PARTITION BY toDate(toDateTime(intDiv(" + wall_column +
         ", 1000000000))) ORDER BY (node, " + wall_column + ")";
}

}  // namespace

Status ValidateNodeName(const std::string& node) {
  if (node.empty() || node.size() > 64) {
    return InvalidArgument("--node must be 1 to 64 characters, got " +
                           std::to_string(node.size()));
  }
  for (char c : node) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') {
      return InvalidArgument("--node '" + node +
                             "' may hold only letters, digits, '.', '-' and '_'");
    }
  }
  return Status::Ok();
}

std::string NodeViewDatabase(const ClickHouseUrl& url, const std::string& node) {
  std::string safe;
  uint32_t hash = 2166136261u;  // FNV-1a: "gpu-1" and "gpu_1" get different databases
  for (char c : node) {
    safe += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
  }
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "_%08x", hash);
  return url.database + "_node_" + safe + suffix;
}

std::vector<std::string> TableStatements(const std::string& db) {
  const std::string n = kNullInt;
  return {
      "CREATE DATABASE IF NOT EXISTS " + db,
      Table(db, "events",
            "session Int64, ts Int64, wall_ns Int64" GW_CLICKHOUSE_EVENT_COLUMN_DECLS,
            ByTime("wall_ns")),
      Table(db, "sessions",
            "id Int64, kind String, wall_start_ns Int64, mono_start_ns Int64, host String, "
            "kernel String, cpu_model String, cores Int64, mem_bytes Int64, "
            "gpu_model Nullable(String), gpu_driver Nullable(String), version String, "
            "command_line String, tracer_pid " + n + ", wall_stop_ns " + n + ", events " + n +
                ", drops " + n + ", drops_detail Nullable(String), launch_duty " + n +
                ", profile_hz " + n,
            "ReplacingMergeTree(batch) ORDER BY (node, spool, id)"),
      Table(db, "processes",
            "session Int64, n UInt32, pid Int32, ppid Int32, name String, comm String, cmdline String, "
            "first_ts " + n + ", exit_ts " + n + ", exit_code " + n + ", tracked UInt8",
            // Every update is kept: a reader replays them in batch order, as the writer
            // merged them (a later update fills what an earlier one left empty).
            "MergeTree() ORDER BY (node, spool, session, pid, batch, n)"),
      Table(db, "snapshots",
            "session Int64, ts Int64, wall_ns Int64, cpu_pct Nullable(Float64), "
            "mem_pct Nullable(Float64), load1 Nullable(Float64), cores Int64, "
            "swap_used_bytes Int64, mem_available_bytes Int64, major_faults_per_s Int64, "
            "ctx_switches_per_s Int64, procs_running Int64, procs_blocked Int64, "
            "iowait_pct Nullable(Float64)",
            ByTime("wall_ns")),
      Table(db, "op_counts",
            "session Int64, sec Int64, pid Int32, op String, name Nullable(String), count Int64, "
            "total_ns Int64, max_ns Int64",
            "MergeTree() ORDER BY (node, spool, session, sec)"),
      Table(db, "stacks",
            "session Int64, id Int64, pid Int32, location String, frames String",
            "ReplacingMergeTree(batch) ORDER BY (node, spool, session, id)"),
      Table(db, "gpu_devices", "session Int64, gpu Int32, name String, gpm_supported UInt8",
            "ReplacingMergeTree(batch) ORDER BY (node, spool, session, gpu)"),
      Table(db, "gpu_samples",
            "session Int64, ts Int64, wall_ns Int64, gpu Int32, util_pct " + n +
                ", mem_util_pct " + n +
                ", sm_active_pct Nullable(Float64), sm_occupancy_pct Nullable(Float64), "
                "tensor_active_pct Nullable(Float64), dram_bw_pct Nullable(Float64), "
                "sm_clock_mhz " + n + ", power_mw " + n + ", throttle_reasons " + n +
                ", mem_used_bytes " + n,
            ByTime("wall_ns")),
      Table(db, "gpu_process_samples",
            "session Int64, ts Int64, gpu Int32, pid Int32, sm_util_pct " + n +
                ", mem_util_pct " + n,
            "MergeTree() ORDER BY (node, spool, session, ts)"),
      // Schema 12 (docs/containers.md): new tables, so no column is added to an old one.
      Table(db, "process_cgroups",
            "session Int64, pid Int32, ts Int64, cgroup String, container_id Nullable(String), "
            "pod_uid Nullable(String), runtime Nullable(String), ns_pid " + n +
                ", pod_name Nullable(String), pod_namespace Nullable(String)",
            "MergeTree() ORDER BY (node, spool, session, pid, ts)"),
      Table(db, "cgroup_cpu_samples",
            "session Int64, ts Int64, cgroup String, version Int32, quota_us " + n +
                ", period_us " + n + ", nr_periods " + n + ", nr_throttled " + n +
                ", throttled_ns " + n + ", usage_ns " + n,
            "MergeTree() ORDER BY (node, spool, session, cgroup, ts)"),
      Table(db, "cgroup_memory_samples",
            "session Int64, ts Int64, cgroup String, version Int32, max_bytes " + n +
                ", high_bytes " + n + ", usage_bytes " + n + ", events_high " + n +
                ", events_max " + n + ", events_oom " + n + ", events_oom_kill " + n +
                ", major_faults " + n,
            "MergeTree() ORDER BY (node, spool, session, cgroup, ts)"),
  };
}

std::vector<std::string> NodeViewStatements(const ClickHouseUrl& url, const std::string& node) {
  const std::string& db = url.database;
  std::string vdb = NodeViewDatabase(url, node);
  std::string where_node = "node = " + ClickHouseQuote(node);
  // The node's newest recording: the session that started last, in whichever file it is.
  std::string newest = "(spool, session) IN (SELECT spool, id FROM " + db +
                       ".gw_sessions WHERE " + where_node +
                       " ORDER BY wall_start_ns DESC LIMIT 1)";
  std::string columns =
      "ts AS timestamp, pid, tid, op, duration_ns, ret, bytes, kind, cpu, other_pid, runq_ns, "
      "addr, name, stack_id, session, waker_pid, waker_tid, since_work_ns, wall_ns, spool";
  return {
      "CREATE DATABASE IF NOT EXISTS " + vdb,
      "DROP TABLE IF EXISTS " + vdb + ".events",
      "CREATE VIEW " + vdb + ".events AS SELECT " + columns + " FROM " + db + ".gw_events WHERE " +
          where_node + " AND " + newest,
      "DROP TABLE IF EXISTS " + vdb + ".events_all",
      "CREATE VIEW " + vdb + ".events_all AS SELECT " + columns + " FROM " + db +
          ".gw_events WHERE " + where_node,
      "DROP TABLE IF EXISTS " + vdb + ".process_names",
      "CREATE VIEW " + vdb + ".process_names AS SELECT pid, argMaxIf(name, batch * 4294967296 + n, name != '') AS name FROM " +
          db + ".gw_processes WHERE " + where_node + " AND " + newest + " GROUP BY pid",
  };
}

StatusOr<std::set<std::string>> ColumnsOf(const ClickHouseClient& client,
                                          const std::string& table) {
  ASSIGN_OR_RETURN(std::string body,
                   client.Query("SELECT name FROM system.columns WHERE database = " +
                                ClickHouseQuote(client.url().database) + " AND table = " +
                                ClickHouseQuote(table) + " FORMAT TabSeparated"));
  std::set<std::string> out;
  for (const TsvRow& r : ParseTsv(body)) {
    if (!r.fields.empty()) out.insert(r.fields[0]);
  }
  return out;
}

Status EnsureClickHouseSchema(const ClickHouseClient& client, const std::string& node) {
  const std::string& db = client.url().database;
  for (const std::string& sql : TableStatements(db)) {
    RETURN_IF_ERROR(client.Execute(sql));
  }
  // Columns added since a database was made by an older gpuwhy (this ClickHouse may predate
  // ADD COLUMN IF NOT EXISTS: ask system.columns first).
  const std::pair<const char*, const char*> kAdded[] = {{"gw_sessions", "profile_hz"},
                                                          {"gw_events", "since_work_ns"}};
  for (const auto& [table, column] : kAdded) {
    ASSIGN_OR_RETURN(std::set<std::string> has, ColumnsOf(client, table));
    if (has.count(column) == 0) {
      RETURN_IF_ERROR(client.Execute("ALTER TABLE " + db + "." + table + " ADD COLUMN " +
                                     column + " " + kNullInt));
    }
  }
  for (const std::string& sql : NodeViewStatements(client.url(), node)) {
    RETURN_IF_ERROR(client.Execute(sql));
  }
  return Status::Ok();
}

}  // namespace gw
