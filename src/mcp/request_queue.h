// RequestQueue: what the stdio transport's two threads share, so that a request can run while
// the next lines are read and a notifications/cancelled can reach it (MCP cancellation).
//
// The reader thread (ServeStdio's caller) reads lines, applies cancellations at once (Cancel)
// and queues every other message (Push). One worker thread takes messages in order (Pop) and
// runs them through HandleMessage with this object as its RequestHooks, so exactly one request
// runs at a time and the order of replies is the order of requests, as before.
//
// A cancellation names a request id. It applies to a request with that id that was read before
// it and has not been answered:
//   - running: the cancel flag is set; statements of StoreReader stop (QueryCancelScope on the
//     worker) and the reply is dropped (End returns false);
//   - not started yet (queued, or later in the batch that runs): it is remembered with the
//     sequence number of the next message, and Begin refuses that request (no run, no reply);
//   - none: ignored. A cancellation never touches a request read after it (a reused id), and
//     `initialize` is never cancelled (the spec forbids clients to).
//
// Thread safety (written to be TSan-clean): every member is guarded by mu_ except cancel_,
// an atomic the worker's SQLite progress handler and watchdog read without the lock; it is
// only set under mu_ while the request it belongs to is the running one (running_ and
// running_id_ are checked under mu_), and cleared under mu_ by Begin/End, so a cancellation
// can never leak into the next request. The McpServer and the database are used by the worker
// only; the output fd is written by the worker only (replies the reader makes itself, e.g. for
// an oversized line, are queued as ready replies). Memory is bounded: at most `capacity`
// messages (each at most the message cap) and kMaxPendingCancels remembered cancellations.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "mcp/json_rpc.h"

namespace gw::mcp {

struct QueuedMessage {
  std::string text;
  bool ready_reply = false;  // `text` is a reply to write as is, not a message to handle
  uint64_t seq = 0;          // set by Push
};

class RequestQueue : public RequestHooks {
 public:
  static constexpr size_t kDefaultCapacity = 16;
  static constexpr size_t kMaxPendingCancels = 1024;

  explicit RequestQueue(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  // Reader thread. Blocks while the queue is full; false once the worker has stopped.
  bool Push(QueuedMessage message);
  // Reader thread: a notifications/cancelled for `id`.
  void Cancel(const Json& id);
  // Reader thread: no more input; the worker drains the queue, then Pop returns nullopt.
  void Close();

  // Worker thread. Blocks until a message, or nullopt when closed and drained or stopped.
  std::optional<QueuedMessage> Pop();
  // Worker thread: it cannot go on (output closed); Push returns false from now on.
  void Stop();
  // Worker thread, through HandleMessage.
  bool Begin(const Json& id, const std::string& method) override;
  bool End() override;

  // The flag the worker's QueryCancelScope watches.
  const std::atomic<bool>* cancel_flag() const { return &cancel_; }

 private:
  struct PendingCancel {
    Json id;
    uint64_t before_seq;  // applies to requests in messages with seq < before_seq
  };

  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<QueuedMessage> queue_;
  uint64_t next_seq_ = 1;
  uint64_t current_seq_ = 0;  // seq of the message the worker handles; 0 = none
  bool closed_ = false;
  bool stopped_ = false;
  bool running_ = false;  // a request of the current message is between Begin and End
  bool running_cancellable_ = false;
  Json running_id_;
  std::vector<PendingCancel> pending_;
  std::atomic<bool> cancel_{false};
};

}  // namespace gw::mcp
