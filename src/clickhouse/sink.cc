#include "clickhouse/sink.h"

#include <algorithm>
#include <chrono>

#include "clickhouse/schema.h"
#include "store/outbox.h"

namespace gw {

namespace {

using Clock = std::chrono::steady_clock;

// Every line of an entry's body gets (node, spool, batch) in front.
std::string WithPrefix(const std::string& prefix, const std::string& body) {
  std::string out;
  size_t lines = static_cast<size_t>(std::count(body.begin(), body.end(), '\n'));
  out.reserve(body.size() + lines * prefix.size());
  size_t pos = 0;
  while (pos < body.size()) {
    size_t eol = body.find('\n', pos);
    if (eol == std::string::npos) eol = body.size() - 1;
    out += prefix;
    out.append(body, pos, eol + 1 - pos);
    pos = eol + 1;
  }
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<ClickHouseSink>> ClickHouseSink::Start(StoreWriter* writer,
                                                                SinkOptions options) {
  RETURN_IF_ERROR(ValidateNodeName(options.node));
  ASSIGN_OR_RETURN(OutboxStatus outbox, writer->OutboxState());
  if (outbox.spool_id == 0) {
    return FailedPrecondition("the database has no outbox: the writer was opened without one");
  }
  std::unique_ptr<ClickHouseSink> sink(new ClickHouseSink(writer, std::move(options),
                                                          outbox.spool_id));
  sink->thread_ = std::thread([s = sink.get()] { s->Run(); });
  return sink;
}

ClickHouseSink::ClickHouseSink(StoreWriter* writer, SinkOptions options, uint64_t spool)
    : writer_(writer), options_(std::move(options)), client_(options_.url), spool_(spool) {
  TsvText(prefix_base_, options_.node);
  prefix_base_ += "\t" + std::to_string(spool_) + "\t";
}

ClickHouseSink::~ClickHouseSink() { Finish(0); }

void ClickHouseSink::Finish(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  finishing_ = true;
  cv_.notify_all();
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return stop_; });
  stop_ = true;
  cv_.notify_all();
  lock.unlock();
  if (thread_.joinable()) thread_.join();
}

SinkStats ClickHouseSink::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void ClickHouseSink::Failed(const Status& st) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.failures;
  stats_.connected = false;
  stats_.last_error = st.message();
}

bool ClickHouseSink::ForwardOnce(bool* idle) {
  *idle = false;
  if (!schema_ready_) {
    Status st = EnsureClickHouseSchema(client_, options_.node);
    if (!st.ok()) {
      Failed(st);
      return false;
    }
    schema_ready_ = true;
  }
  StatusOr<std::vector<OutboxEntry>> entries =
      writer_->ReadOutbox(acked_through_, options_.max_read_bytes);
  if (!entries.ok()) {
    Failed(entries.status());
    return false;
  }
  if (entries->empty()) {
    *idle = true;
    return true;
  }
  const std::string& db = options_.url.database;
  for (const OutboxEntry& e : *entries) {
    std::string table = "gw_" + e.table;
    if (e.id == uncertain_batch_) {
      // The last send of this entry got no answer: it may be there already.
      StatusOr<std::string> found = client_.Query(
          "SELECT count() FROM " + db + "." + table + " WHERE node = " +
              ClickHouseQuote(options_.node) + " AND spool = " + std::to_string(spool_) +
              " AND batch = " + std::to_string(e.id),
          "", options_.request_timeout_ms, /*max_bytes=*/4096);  // one number
      if (!found.ok()) {
        Failed(found.status());
        return false;
      }
      if (std::strtoll(found->c_str(), nullptr, 10) > 0) {
        uncertain_batch_ = 0;
        if (Status ack = writer_->AckOutbox(e.id, static_cast<int64_t>(e.body.size()));
            !ack.ok()) {
          Failed(ack);
          return false;
        }
        acked_through_ = e.id;
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.duplicates_skipped;
        continue;
      }
    }
    std::string tsv = WithPrefix(prefix_base_ + std::to_string(e.id) + "\t", e.body);
    bool sent = false;
    Status st = client_.InsertTsv(table, tsv, &sent, options_.request_timeout_ms);
    if (!st.ok()) {
      if (st.code() == StatusCode::kUnavailable) {
        if (sent) uncertain_batch_ = e.id;
        Failed(st);
        return false;
      }
      // Refused (a table changed under us, a row it cannot parse): the tables are made again
      // and the entry retried; after five refusals it is dropped and counted, so one bad entry
      // cannot hold back every row behind it.
      schema_ready_ = false;
      rejections_ = (rejected_batch_ == e.id) ? rejections_ + 1 : 1;
      rejected_batch_ = e.id;
      Failed(st);
      if (rejections_ < 5) return false;
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.entries_rejected;
      stats_.rows_rejected += e.rows;
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.rows_sent += e.rows;
      ++stats_.entries_sent;
      stats_.bytes_sent += static_cast<int64_t>(tsv.size());
      stats_.connected = true;
    }
    uncertain_batch_ = 0;
    if (Status ack = writer_->AckOutbox(e.id, static_cast<int64_t>(e.body.size())); !ack.ok()) {
      Failed(ack);
      return false;
    }
    acked_through_ = e.id;
  }
  return true;
}

void ClickHouseSink::Run() {
  int64_t backoff_ms = options_.initial_backoff_ms;
  for (;;) {
    bool idle = false;
    bool ok = ForwardOnce(&idle);
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_) break;
    if (ok) backoff_ms = options_.initial_backoff_ms;
    if (ok && idle && finishing_) break;  // everything the outbox held is delivered
    if (ok && !idle) continue;            // more to send
    int64_t wait_ms = ok ? 200 : backoff_ms;
    if (!ok) backoff_ms = std::min(backoff_ms * 2, options_.max_backoff_ms);
    cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [&] { return stop_; });
    if (stop_) break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = true;
  cv_.notify_all();
}

}  // namespace gw
