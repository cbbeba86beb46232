#include "mcp/request_queue.h"

#include <gtest/gtest.h>

#include <thread>

namespace gw::mcp {
namespace {

// The worker's view of one message: Pop, then Begin/End per request as HandleMessage does.
TEST(RequestQueueTest, CancelStopsOnlyTheRunningRequestItNames) {
  RequestQueue q;
  ASSERT_TRUE(q.Push(QueuedMessage{"a"}));
  ASSERT_TRUE(q.Pop().has_value());
  ASSERT_TRUE(q.Begin(1, "tools/call"));
  q.Cancel(2);    // another id: nothing
  q.Cancel("1");  // a string is not the number 1
  EXPECT_FALSE(q.cancel_flag()->load());
  q.Cancel(1);
  EXPECT_TRUE(q.cancel_flag()->load());
  EXPECT_FALSE(q.End()) << "a cancelled request's reply is dropped";
  EXPECT_FALSE(q.cancel_flag()->load()) << "the flag must not leak into the next request";
  // The same message's (a batch's) next request runs normally...
  ASSERT_TRUE(q.Begin(3, "tools/call"));
  EXPECT_FALSE(q.cancel_flag()->load());
  EXPECT_TRUE(q.End());
  // ...while one later in it that was named (2, above) is not run.
  EXPECT_FALSE(q.Begin(2, "tools/call"));
}

TEST(RequestQueueTest, CancelOfAQueuedRequestSkipsIt) {
  RequestQueue q;
  ASSERT_TRUE(q.Push(QueuedMessage{"first"}));
  ASSERT_TRUE(q.Pop().has_value());
  ASSERT_TRUE(q.Begin(1, "tools/call"));
  ASSERT_TRUE(q.Push(QueuedMessage{"second"}));
  q.Cancel(7);  // names the queued request
  EXPECT_FALSE(q.cancel_flag()->load()) << "the running request is not the one cancelled";
  EXPECT_TRUE(q.End());
  ASSERT_TRUE(q.Pop().has_value());
  EXPECT_FALSE(q.Begin(7, "tools/call")) << "cancelled before it started: not run";
  // A request read after the cancellation, with the same (reused) id, is not affected.
  ASSERT_TRUE(q.Push(QueuedMessage{"third"}));
  ASSERT_TRUE(q.Pop().has_value());
  EXPECT_TRUE(q.Begin(7, "tools/call"));
  EXPECT_TRUE(q.End());
}

TEST(RequestQueueTest, UnknownAndFinishedIdsAreIgnored) {
  RequestQueue q;
  q.Cancel(1);  // nothing read yet
  ASSERT_TRUE(q.Push(QueuedMessage{"a"}));
  ASSERT_TRUE(q.Pop().has_value());
  EXPECT_TRUE(q.Begin(1, "ping")) << "a cancellation read before the request does not apply";
  EXPECT_TRUE(q.End());
  q.Cancel(1);  // finished
  ASSERT_TRUE(q.Push(QueuedMessage{"b"}));
  ASSERT_TRUE(q.Pop().has_value());
  EXPECT_TRUE(q.Begin(2, "ping"));
  EXPECT_FALSE(q.cancel_flag()->load());
  EXPECT_TRUE(q.End());
  // Many cancellations for unknown ids cost bounded memory and cancel nothing.
  ASSERT_TRUE(q.Push(QueuedMessage{"c"}));
  for (int i = 0; i < 100000; ++i) q.Cancel(1000 + i);
  ASSERT_TRUE(q.Pop().has_value());
  EXPECT_TRUE(q.Begin(3, "ping"));
  EXPECT_TRUE(q.End());
}

TEST(RequestQueueTest, InitializeIsNotCancelled) {
  RequestQueue q;
  ASSERT_TRUE(q.Push(QueuedMessage{"a"}));
  ASSERT_TRUE(q.Pop().has_value());
  ASSERT_TRUE(q.Begin(1, "initialize"));
  q.Cancel(1);
  EXPECT_FALSE(q.cancel_flag()->load());
  EXPECT_TRUE(q.End());
}

TEST(RequestQueueTest, BoundedAndClosable) {
  RequestQueue q(2);
  ASSERT_TRUE(q.Push(QueuedMessage{"1"}));
  ASSERT_TRUE(q.Push(QueuedMessage{"2"}));
  std::thread reader([&] {
    EXPECT_TRUE(q.Push(QueuedMessage{"3"}));  // blocks until the worker takes one
    q.Close();
  });
  std::vector<std::string> got;
  while (std::optional<QueuedMessage> m = q.Pop()) got.push_back(m->text);
  reader.join();
  EXPECT_EQ(got, (std::vector<std::string>{"1", "2", "3"}));
  RequestQueue stopped(1);
  ASSERT_TRUE(stopped.Push(QueuedMessage{"x"}));
  std::thread blocked([&] { EXPECT_FALSE(stopped.Push(QueuedMessage{"y"})); });
  stopped.Stop();
  blocked.join();
  EXPECT_FALSE(stopped.Pop().has_value());
}

}  // namespace
}  // namespace gw::mcp
