// ClickHouseSink: forwards the outbox of a recording database (store/outbox.h) to ClickHouse,
// `gpuwhy trace --sink clickhouse://…`.
//
// One thread reads the oldest outbox entries, prefixes each row with (node, spool, batch) and
// inserts each entry as one gzip-compressed TabSeparated INSERT into its gw_ table; an entry is
// deleted from the outbox only after ClickHouse accepted it. While ClickHouse is down or slow
// the entries wait in the database (memory stays at one read of at most 4 MiB) and the thread
// retries with a backoff of 0.5 s doubling to 10 s.
//
// Exactly once: an INSERT below max_insert_block_size rows is atomic in ClickHouse. When a
// request was sent but no answer came (a restart mid-request, a timeout), the sink asks whether
// rows of that batch are there before sending it again.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"
#include "clickhouse/client.h"
#include "store/writer.h"

namespace gw {

struct SinkOptions {
  ClickHouseUrl url;
  std::string node;
  int64_t max_read_bytes = 4 << 20;        // outbox bytes per read
  int64_t request_timeout_ms = 10000;
  int64_t initial_backoff_ms = 500;
  int64_t max_backoff_ms = 10000;
};

struct SinkStats {
  int64_t rows_sent = 0;
  int64_t entries_sent = 0;
  int64_t bytes_sent = 0;      // uncompressed TSV
  int64_t failures = 0;        // requests that failed (each retried)
  int64_t duplicates_skipped = 0;  // batches found already in ClickHouse after an unanswered send
  int64_t entries_rejected = 0;    // refused by ClickHouse five times for a reason not transient
  int64_t rows_rejected = 0;
  bool connected = false;      // the last request succeeded
  std::string last_error;
};

class ClickHouseSink {
 public:
  // Does not contact ClickHouse: the thread does, so a server that is down delays nothing.
  static StatusOr<std::unique_ptr<ClickHouseSink>> Start(StoreWriter* writer, SinkOptions options);
  ~ClickHouseSink();

  // Keeps forwarding until the outbox is empty or `timeout_ms` passed, then stops the thread.
  // What is left waits in the database for the next sink on this file.
  void Finish(int64_t timeout_ms);
  SinkStats stats() const;

 private:
  ClickHouseSink(StoreWriter* writer, SinkOptions options, uint64_t spool);
  void Run();
  // One pass over what the outbox holds; false when a request failed (back off).
  bool ForwardOnce(bool* idle);
  void Failed(const Status& st);

  StoreWriter* writer_;
  SinkOptions options_;
  ClickHouseClient client_;
  uint64_t spool_;
  std::string prefix_base_;  // "node\tspool\t"

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool finishing_ = false;
  bool stop_ = false;
  SinkStats stats_;

  // Sink thread only.
  bool schema_ready_ = false;
  int64_t acked_through_ = 0;
  int64_t uncertain_batch_ = 0;  // sent, unanswered: check before sending again
  int64_t rejected_batch_ = 0;   // refused for a reason not transient, and how often
  int rejections_ = 0;
  std::thread thread_;
};

}  // namespace gw
