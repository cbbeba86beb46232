#include "store/timeline_rows.h"

#include <sqlite3.h>

#include <algorithm>
#include <string>

#include "store/ops.h"
#include "store/row_columns.h"
#include "store/window_rows.h"

namespace gw {

StatusOr<std::vector<ActivityBucket>> ReadActivityTimeline(StoreReader& reader,
                                                           const SessionWindow& window,
                                                           int64_t bucket_ns, int32_t pid,
                                                           int32_t gpu) {
  if (bucket_ns < 1'000'000) return InvalidArgument("timeline buckets must be ≥ 1 ms");
  const int64_t begin = std::max<int64_t>(0, window.begin_ns);
  const int64_t first = begin / bucket_ns;
  const int64_t last = std::max(first, (window.end_ns - 1) / bucket_ns);
  if (last - first + 1 > 100'000) return InvalidArgument("too many timeline buckets");
  std::vector<ActivityBucket> out(static_cast<size_t>(last - first + 1));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].begin_ns = (first + static_cast<int64_t>(i)) * bucket_ns;
  }
  auto at = [&](int64_t b) -> ActivityBucket* {
    if (b < first || b > last) return nullptr;
    return &out[static_cast<size_t>(b - first)];
  };
  const std::string syncs = std::to_string(static_cast<int>(Op::kCudaStreamSync)) + ", " +
                            std::to_string(static_cast<int>(Op::kCudaDeviceSync)) + ", " +
                            std::to_string(static_cast<int>(Op::kCudaEventSync));
  const std::string pid_filter = pid > 0 ? " AND pid = " + std::to_string(pid) : "";
  RETURN_IF_ERROR(reader.ForEach(
      "SELECT ts / ?4, SUM(op = " + std::to_string(static_cast<int>(Op::kSchedSwitch)) +
          "), SUM(op IN (" + syncs + ")" + pid_filter + "), AVG(CASE WHEN op IN (" + syncs +
          ")" + pid_filter + " THEN duration_ns END), MAX(CASE WHEN op IN (" + syncs + ")" +
          pid_filter +
          " THEN duration_ns END) FROM event_rows WHERE session = ?1 AND ts >= ?2 AND ts < ?3 "
          "GROUP BY 1",
      {window.session, window.begin_ns, window.end_ns, bucket_ns}, [&](sqlite3_stmt* s) {
        ActivityBucket* b = at(sqlite3_column_int64(s, 0));
        if (b == nullptr) return;
        b->switches = sqlite3_column_int64(s, 1);
        b->syncs = sqlite3_column_int64(s, 2);
        b->sync_avg_ns = sqlite3_column_double(s, 3);
        b->sync_max_ns = sqlite3_column_int64(s, 4);
      }));
  // op_seconds is per second: a bucket of whole seconds takes the seconds that start in it.
  // Launches counted one second in N (sessions.launch_duty > 1) are left out: the seconds
  // between counting seconds have none, which would read as drops in the series.
  const int64_t bucket_s = std::max<int64_t>(1, bucket_ns / 1'000'000'000);
  ASSIGN_OR_RETURN(int64_t duty, ReadLaunchDuty(reader, window.session));
  std::string no_launches =
      duty > 1 ? std::string(" AND op NOT IN (") + kLaunchOpList + ")" : std::string();
  RETURN_IF_ERROR(reader.ForEach(
      "SELECT sec / ?4, SUM(count) FROM op_seconds WHERE session = ?1 AND sec >= ?2 AND "
      "sec <= ?3 AND op < " + std::to_string(static_cast<int>(Op::kSchedSwitch)) + pid_filter +
          no_launches + " GROUP BY 1",
      {window.session, begin / 1'000'000'000, (window.end_ns - 1) / 1'000'000'000, bucket_s},
      [&](sqlite3_stmt* s) {
        int64_t sec_bucket = sqlite3_column_int64(s, 0);
        if (ActivityBucket* b = at(sec_bucket * bucket_s * 1'000'000'000 / bucket_ns)) {
          b->cuda_calls += sqlite3_column_int64(s, 1);
        }
      }));
  if (gpu >= 0) {  // samples exist only from schema 4 on, and the caller found some
    RETURN_IF_ERROR(reader.ForEach(
        "SELECT ts / ?4, AVG(COALESCE(sm_active_pct, util_pct)) FROM gpu_samples WHERE "
        "session = ?1 AND ts >= ?2 AND ts < ?3 AND gpu = ?5 GROUP BY 1",
        {window.session, window.begin_ns, window.end_ns, bucket_ns, gpu}, [&](sqlite3_stmt* s) {
          ActivityBucket* b = at(sqlite3_column_int64(s, 0));
          if (b != nullptr && sqlite3_column_type(s, 1) != SQLITE_NULL) {
            b->gpu_active_pct = sqlite3_column_double(s, 1);
          }
        }));
  }
  return out;
}

}  // namespace gw
