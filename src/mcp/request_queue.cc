#include "mcp/request_queue.h"

#include <algorithm>

namespace gw::mcp {

bool RequestQueue::Push(QueuedMessage message) {
  std::unique_lock<std::mutex> lock(mu_);
  not_full_.wait(lock, [&] { return queue_.size() < capacity_ || stopped_; });
  if (stopped_) return false;
  message.seq = next_seq_++;
  queue_.push_back(std::move(message));
  not_empty_.notify_one();
  return true;
}

void RequestQueue::Cancel(const Json& id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_ && running_cancellable_ && running_id_ == id) {
    cancel_.store(true, std::memory_order_relaxed);
    return;
  }
  // Not running: it may still be queued, or later in the message that runs now. With neither,
  // nothing read before this cancellation is unanswered, so there is nothing to remember.
  if (queue_.empty() && current_seq_ == 0) return;
  if (pending_.size() >= kMaxPendingCancels) return;  // best effort beyond the bound
  pending_.push_back(PendingCancel{id, next_seq_});
}

void RequestQueue::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  not_empty_.notify_all();
}

std::optional<QueuedMessage> RequestQueue::Pop() {
  std::unique_lock<std::mutex> lock(mu_);
  current_seq_ = 0;
  not_empty_.wait(lock, [&] { return !queue_.empty() || closed_ || stopped_; });
  if (stopped_ || queue_.empty()) return std::nullopt;
  QueuedMessage message = std::move(queue_.front());
  queue_.pop_front();
  current_seq_ = message.seq;
  // A cancellation applies only to messages read before it; none of those is left once this
  // one (or a later one) is taken.
  pending_.erase(
      std::remove_if(pending_.begin(), pending_.end(),
                     [&](const PendingCancel& c) { return c.before_seq <= message.seq; }),
      pending_.end());
  not_full_.notify_one();
  return message;
}

void RequestQueue::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  not_full_.notify_all();
  not_empty_.notify_all();
}

bool RequestQueue::Begin(const Json& id, const std::string& method) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool cancellable = method != "initialize";
  auto it = std::find_if(pending_.begin(), pending_.end(), [&](const PendingCancel& c) {
    return c.before_seq > current_seq_ && c.id == id;
  });
  if (it != pending_.end()) {
    pending_.erase(it);
    if (cancellable) return false;
  }
  running_ = true;
  running_cancellable_ = cancellable;
  running_id_ = id;
  cancel_.store(false, std::memory_order_relaxed);
  return true;
}

bool RequestQueue::End() {
  std::lock_guard<std::mutex> lock(mu_);
  running_ = false;
  running_id_ = nullptr;
  return !cancel_.exchange(false, std::memory_order_relaxed);
}

}  // namespace gw::mcp
