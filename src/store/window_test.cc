// The window rule of store/window.h, on numbers (WindowOfSession) and on files (ResolveWindow):
// defaults, clipping to the session, windows longer than the session, empty and killed
// sessions, bad requests.
#include "store/window.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "store/reader.h"
#include "store/writer.h"

namespace gw {
namespace {

constexpr int64_t kSec = 1'000'000'000;

SessionWindow Resolve(const WindowRequest& r, int64_t first, int64_t last) {
  StatusOr<SessionWindow> w = WindowOfSession(r, 1, first, last);
  EXPECT_TRUE(w.ok()) << w.status().message();
  return w.ok() ? *w : SessionWindow{};
}

TEST(WindowRule, LastNEndsAfterTheNewestEvent) {
  WindowRequest r;
  r.since_ns = 30 * kSec;
  SessionWindow w = Resolve(r, 2 * kSec, 100 * kSec);
  // The brief's `timestamp > MAX(timestamp) - N`: [last + 1 − N, last + 1).
  EXPECT_EQ(w.end_ns, 100 * kSec + 1);
  EXPECT_EQ(w.begin_ns, 70 * kSec + 1);
  EXPECT_EQ(w.label, "last 30 s");
  EXPECT_FALSE(w.whole_session);
}

TEST(WindowRule, DefaultSinceAppliesOnlyWithoutSinceOrFrom) {
  WindowRequest r;
  r.default_since_ns = kDefaultSinceNs;
  SessionWindow w = Resolve(r, 0, 300 * kSec);
  EXPECT_EQ(w.begin_ns, 180 * kSec + 1);
  EXPECT_EQ(w.label, "last 2 min");
  r.from_ns = 10 * kSec;
  w = Resolve(r, 0, 300 * kSec);
  EXPECT_EQ(w.begin_ns, 10 * kSec);
  EXPECT_EQ(w.end_ns, 300 * kSec + 1);
  EXPECT_EQ(w.label, "10.0 s – 300.0 s");
}

TEST(WindowRule, NoSinceNoRangeIsTheWholeSession) {
  SessionWindow w = Resolve(WindowRequest{}, 3 * kSec, 50 * kSec);
  EXPECT_EQ(w.begin_ns, 3 * kSec);  // from the first event, not from 0
  EXPECT_EQ(w.end_ns, 50 * kSec + 1);
  EXPECT_TRUE(w.whole_session);
  EXPECT_EQ(w.label, "whole session");
}

TEST(WindowRule, WindowLongerThanTheSessionIsClippedToItsStart) {
  WindowRequest r;
  r.since_ns = 120 * kSec;
  SessionWindow w = Resolve(r, kSec / 2, 21 * kSec);
  EXPECT_EQ(w.begin_ns, 0);
  EXPECT_EQ(w.end_ns, 21 * kSec + 1);
  EXPECT_EQ(w.label, "last 21 s");  // what the recording covers
  // An edited file with timestamps before the session's start: clipped to its first event.
  w = Resolve(r, -5 * kSec, 21 * kSec);
  EXPECT_EQ(w.begin_ns, -5 * kSec);
}

TEST(WindowRule, SinceWithToEndsAtTo) {
  WindowRequest r;
  r.since_ns = 20 * kSec;
  r.to_ns = 50 * kSec;
  SessionWindow w = Resolve(r, 0, 100 * kSec);
  EXPECT_EQ(w.begin_ns, 30 * kSec);
  EXPECT_EQ(w.end_ns, 50 * kSec);
  EXPECT_EQ(w.label, "30.0 s – 50.0 s");
  // --to alone with explain's default: the 2 minutes before it, clipped at the session start.
  WindowRequest t;
  t.default_since_ns = kDefaultSinceNs;
  t.to_ns = 90 * kSec;
  w = Resolve(t, kSec, 100 * kSec);
  EXPECT_EQ(w.begin_ns, 0);
  EXPECT_EQ(w.end_ns, 90 * kSec);
  // Without a default: from the first event.
  t.default_since_ns.reset();
  w = Resolve(t, kSec, 100 * kSec);
  EXPECT_EQ(w.begin_ns, kSec);
  EXPECT_FALSE(w.whole_session);
}

TEST(WindowRule, BadRequestsAreRefusedWithTheirNames) {
  auto error = [](WindowRequest r) {
    StatusOr<SessionWindow> w = WindowOfSession(r, 1, 0, 100 * kSec);
    EXPECT_FALSE(w.ok());
    return w.ok() ? std::string() : w.status().message();
  };
  WindowRequest zero;
  zero.since_ns = 0;
  EXPECT_NE(error(zero).find("--since must be a positive duration"), std::string::npos);
  WindowRequest both;
  both.since_ns = kSec;
  both.from_ns = kSec;
  both.names = {"since_s", "from_s", "to_s", "session"};
  EXPECT_NE(error(both).find("give either since_s or from_s, not both"), std::string::npos);
  WindowRequest reversed;
  reversed.from_ns = 20 * kSec;
  reversed.to_ns = 10 * kSec;
  EXPECT_NE(error(reversed).find("empty window: --from must be before --to"), std::string::npos);
  WindowRequest negative;
  negative.to_ns = -1;
  EXPECT_NE(error(negative).find("cannot be negative"), std::string::npos);
  WindowRequest after_end;
  after_end.from_ns = 500 * kSec;
  EXPECT_NE(error(after_end).find("empty window: it would start at 500.0 s"), std::string::npos);
  WindowRequest bad_session;
  bad_session.session = -1;
  EXPECT_NE(error(bad_session).find("--session must be a session id"), std::string::npos);
}

TEST(WindowRule, SecondsToNsRounds) {
  EXPECT_EQ(SecondsToNs(0.1), 100'000'000);
  EXPECT_EQ(SecondsToNs(1e-9), 1);
  EXPECT_EQ(SecondsToNs(2.9999999996), 3 * kSec);
}

// Sessions on a file: 1 — ended, events 1 s … 40 s; 2 — killed (no stop time), events
// 0.5 s … 8 s; 3 — ended, no events.
class WindowFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gw_window_test_XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/w.db";
    auto writer = StoreWriter::Create(path_, {});
    ASSERT_TRUE(writer.ok()) << writer.status().message();
    StoreWriter& w = **writer;
    auto session = [&](std::vector<int64_t> ts, bool end) {
      SessionInfo info;
      info.kind = "test";
      info.wall_start_ns = 1;
      ASSERT_TRUE(w.BeginSession(info).ok());
      for (int64_t t : ts) {
        Event e;
        e.ts_ns = t;
        e.pid = e.tid = 100;
        e.op = Op::kSchedSwitch;
        e.duration_ns = 1000;
        w.AppendEvent(e);
      }
      ASSERT_TRUE(w.Flush().ok());
      if (end) {
        SessionTotals totals;
        totals.wall_stop_ns = 2;
        totals.events = static_cast<int64_t>(ts.size());
        ASSERT_TRUE(w.EndSession(totals).ok());
      }
    };
    session({1 * kSec, 20 * kSec, 40 * kSec}, true);
    session({kSec / 2, 8 * kSec}, false);
    ASSERT_TRUE(w.Close().ok());
    // The killed session never got its stop time; a later recording starts a new session.
    auto again = StoreWriter::Create(path_, {});
    ASSERT_TRUE(again.ok()) << again.status().message();
    SessionInfo info;
    info.kind = "test";
    info.wall_start_ns = 3;
    ASSERT_TRUE((*again)->BeginSession(info).ok());
    ASSERT_TRUE((*again)->EndSession(SessionTotals{}).ok());
    ASSERT_TRUE((*again)->Close().ok());
    auto reader = StoreReader::Open(path_);
    ASSERT_TRUE(reader.ok()) << reader.status().message();
    reader_ = std::move(*reader);
  }
  void TearDown() override { (void)!std::system(("rm -rf " + dir_).c_str()); }

  std::string dir_, path_;
  std::unique_ptr<StoreReader> reader_;
};

TEST_F(WindowFileTest, ResolvesOnTheSessionsEvents) {
  WindowRequest r;
  r.session = 1;
  StatusOr<SessionWindow> w = ResolveWindow(*reader_, r);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->session, 1);
  EXPECT_EQ(w->begin_ns, 1 * kSec);
  EXPECT_EQ(w->end_ns, 40 * kSec + 1);
  EXPECT_EQ(w->first_ts_ns, 1 * kSec);
  EXPECT_EQ(w->last_ts_ns, 40 * kSec);
}

TEST_F(WindowFileTest, KilledSessionEndsAtItsNewestEvent) {
  WindowRequest r;
  r.session = 2;
  r.since_ns = 120 * kSec;  // longer than the session
  StatusOr<SessionWindow> w = ResolveWindow(*reader_, r);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->begin_ns, 0);
  EXPECT_EQ(w->end_ns, 8 * kSec + 1);
  EXPECT_EQ(w->label, "last 8 s");
}

TEST_F(WindowFileTest, EmptySessionIsAnError) {
  WindowRequest r;
  r.session = 3;  // the newest session, which has no events, asked for by number
  StatusOr<SessionWindow> w = ResolveWindow(*reader_, r);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kNotFound);
  EXPECT_NE(w.status().message().find("session 3 in " + path_ + " has no events"),
            std::string::npos)
      << w.status().message();
}

TEST_F(WindowFileTest, DefaultSessionIsTheNewestThatRecordedSomething) {
  StatusOr<SessionWindow> w = ResolveWindow(*reader_, WindowRequest{});  // session 3 is empty
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_NE(w->session, 3);
}

TEST_F(WindowFileTest, MissingSessionListsTheSessions) {
  WindowRequest r;
  r.session = 9;
  StatusOr<SessionWindow> w = ResolveWindow(*reader_, r);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kNotFound);
  EXPECT_NE(w.status().message().find("session 9 is not in " + path_ + " (sessions: 1, 2, 3)"),
            std::string::npos)
      << w.status().message();
}

// A session recorded by `trace -- CMD` (kind "job") is the job's lifetime: explain's default
// window is all of it, not its last 2 minutes; an attached trace keeps the default.
TEST(WindowJobSession, DefaultWindowIsTheJobsLifetime) {
  char tmpl[] = "/tmp/gw_window_job_XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string path = dir + "/j.db";
  {
    auto writer = StoreWriter::Create(path, {});
    ASSERT_TRUE(writer.ok()) << writer.status().message();
    for (const char* kind : {"job", "trace"}) {
      SessionInfo info;
      info.kind = kind;
      info.wall_start_ns = 1;
      ASSERT_TRUE((*writer)->BeginSession(info).ok());
      for (int64_t t : {1 * kSec, 150 * kSec, 300 * kSec}) {
        Event e;
        e.ts_ns = t;
        e.pid = e.tid = 100;
        e.op = Op::kSchedSwitch;
        (*writer)->AppendEvent(e);
      }
      ASSERT_TRUE((*writer)->EndSession(SessionTotals{}).ok());
    }
    ASSERT_TRUE((*writer)->Close().ok());
  }
  auto reader = StoreReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  WindowRequest job = WindowRequestWithDefaultSince(kDefaultSinceNs);
  job.session = 1;
  StatusOr<SessionWindow> w = ResolveWindow(**reader, job);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->begin_ns, 1 * kSec);
  EXPECT_EQ(w->label, "whole session");
  WindowRequest attached = WindowRequestWithDefaultSince(kDefaultSinceNs);
  attached.session = 2;
  w = ResolveWindow(**reader, attached);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->begin_ns, 300 * kSec + 1 - kDefaultSinceNs);
  // An explicit --since still applies to a job's session.
  job.since_ns = 10 * kSec;
  w = ResolveWindow(**reader, job);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->begin_ns, 290 * kSec + 1);
  (void)!std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace gw
