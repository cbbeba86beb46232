#include "mcp/json_rpc.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "mcp/line_reader.h"

namespace gw::mcp {
namespace {

// Echoes params for "echo", throws for "throw", records notifications.
class FakeHandler : public RpcHandler {
 public:
  RpcResult HandleRequest(const std::string& method, const Json& params) override {
    if (method == "echo") return Json{{"params", params}};
    if (method == "throw") throw std::runtime_error("boom");
    if (method == "json_throw") return Json(Json::parse("{bad"));  // nlohmann throws
    if (method == "bad_params") return RpcError{RpcErrorCode::kInvalidParams, "nope", nullptr};
    return RpcError{RpcErrorCode::kMethodNotFound, "method not found", nullptr};
  }
  void HandleNotification(const std::string& method, const Json&) override {
    notifications.push_back(method);
    if (method == "throw") throw std::runtime_error("boom");
  }
  bool BatchesAllowed() const override { return batches; }

  std::vector<std::string> notifications;
  bool batches = false;
};

Json Reply(FakeHandler& h, const std::string& message) {
  std::string out = HandleMessage(h, message);
  EXPECT_FALSE(out.empty()) << message;
  EXPECT_EQ(out.find('\n'), std::string::npos) << "a reply must be one line";
  return Json::parse(out);
}

int ErrorCode(const Json& reply) { return reply.at("error").at("code").get<int>(); }

TEST(JsonRpcTest, AnswersARequestWithItsId) {
  FakeHandler h;
  Json r = Reply(h, R"({"jsonrpc":"2.0","id":7,"method":"echo","params":{"a":1}})");
  EXPECT_EQ(r["jsonrpc"], "2.0");
  EXPECT_EQ(r["id"], 7);
  EXPECT_EQ(r["result"]["params"]["a"], 1);
  Json s = Reply(h, R"({"jsonrpc":"2.0","id":"abc","method":"echo"})");
  EXPECT_EQ(s["id"], "abc");
  EXPECT_TRUE(s["result"]["params"].is_null());
}

// Issue 12: 1.2e29 came back reformatted; JSON-RPC echoes the id exactly.
TEST(JsonRpcTest, EchoesNumericIdsAsWritten) {
  FakeHandler h;
  for (const char* id : {"1.2e29", "1.0", "100000000000000000000000", "-0.5E+3", "7"}) {
    std::string msg = std::string(R"({"jsonrpc":"2.0","method":"nope","id":)") + id + "}";
    std::string out = HandleMessage(h, msg);
    EXPECT_NE(out.find(std::string("\"id\":") + id + ","), std::string::npos) << out;
    EXPECT_TRUE(Json::accept(out)) << out;
  }
  // An "id" nested in params is not the message's id.
  std::string out = HandleMessage(
      h, R"({"jsonrpc":"2.0","params":{"id":2.50},"method":"nope","id":1.50})");
  EXPECT_NE(out.find("\"id\":1.50,"), std::string::npos) << out;
  EXPECT_EQ(out.find("2.50"), std::string::npos) << out;
  out = HandleMessage(h, R"({"jsonrpc":"2.0","method":"nope","id":"a\"id\":9"})");
  EXPECT_EQ(Json::parse(out)["id"], "a\"id\":9");
}

// Issue 12: string ids came back re-escaped ("a\u0041" as "aA", "x\/y" as "x/y").
TEST(JsonRpcTest, EchoesStringIdsVerbatim) {
  FakeHandler h;
  for (const char* id : {R"("a\u0041")", R"("x\/y")", R"("\ud83d\ude00 \"q\"")", R"("plain")"}) {
    std::string msg = std::string(R"({"jsonrpc":"2.0","id":)") + id + R"(,"method":"echo"})";
    std::string out = HandleMessage(h, msg);
    EXPECT_NE(out.find(std::string("\"id\":") + id + ","), std::string::npos) << out;
    EXPECT_EQ(Json::parse(out)["id"], Json::parse(id));
  }
}

// Issue 12: inside a batch every id was reformatted (1e0 came back as 1.0, a big integer as
// 1e+23), where single messages already echoed them as written.
TEST(JsonRpcTest, BatchesEchoEveryIdAsWritten) {
  FakeHandler h;
  h.batches = true;
  const std::vector<std::string> ids = {"1e0",     "1.2e29", "100000000000000000000000",
                                        "-0.5E+3", "7",      R"("a\u0041")",
                                        "2.50",    R"("x\/y")"};
  std::string batch = "[ ";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) batch += i % 2 ? " ,\n" : ",";
    // Every other one with an "id" nested in params, a notification in between.
    batch += i % 2 ? R"({"jsonrpc":"2.0","method":"echo","params":{"id":3.0E0},"id" : )" + ids[i] +
                         "}"
                   : R"({"jsonrpc":"2.0","method":"nope","id":)" + ids[i] +
                         R"(},{"jsonrpc":"2.0","method":"n"})";
  }
  batch += " ]";
  std::string out = HandleMessage(h, batch);
  ASSERT_TRUE(Json::accept(out)) << out;
  Json replies = Json::parse(out);
  ASSERT_TRUE(replies.is_array());
  ASSERT_EQ(replies.size(), ids.size()) << out;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_NE(out.find("\"id\":" + ids[i] + ","), std::string::npos) << ids[i] << " in " << out;
    EXPECT_EQ(replies[i]["id"], Json::parse(ids[i]));
  }
  EXPECT_EQ(out.find("3.0E0,"), std::string::npos) << "a nested id is not the message's";
  // Invalid elements keep their null id and the batch stays well-formed.
  out = HandleMessage(h, R"([1, {"jsonrpc":"2.0","id":1.0,"method":"nope"}, [2], "s"])");
  ASSERT_TRUE(Json::accept(out)) << out;
  EXPECT_EQ(Json::parse(out).size(), 4u);
  EXPECT_NE(out.find("\"id\":1.0,"), std::string::npos) << out;
}

TEST(JsonRpcTest, FindsCancelledRequestIds) {
  bool only = false;
  std::vector<Json> ids = CancelledRequestIds(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r1",)"
      R"("reason":"user"}})",
      &only);
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids[0], "r1");
  EXPECT_TRUE(only);
  ids = CancelledRequestIds(
      R"([{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}},)"
      R"({"jsonrpc":"2.0","id":9,"method":"ping"}])",
      &only);
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids[0], 5);
  EXPECT_FALSE(only);  // the batch also holds a request
  // Malformed cancellations, a request of that name and other text are no cancellation.
  for (const char* m :
       {R"({"jsonrpc":"2.0","method":"notifications/cancelled"})",
        R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":null}})",
        R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":[1]}})",
        R"({"jsonrpc":"2.0","id":1,"method":"notifications/cancelled","params":{"requestId":1}})",
        R"({"jsonrpc":"2.0","id":1,"method":"echo","params":{"x":"notifications/cancelled"}})",
        "notifications/cancelled {", "[[[[notifications/cancelled"}) {
    EXPECT_TRUE(CancelledRequestIds(m, &only).empty()) << m;
    EXPECT_FALSE(only) << m;
  }
}

TEST(JsonRpcTest, ParseErrorHasNullIdAndCode32700) {
  FakeHandler h;
  for (const char* bad : {"{", "not json", R"({"jsonrpc":"2.0","id":1,)", "\xff\xfe", "[1,2"}) {
    Json r = Reply(h, bad);
    EXPECT_EQ(ErrorCode(r), -32700) << bad;
    EXPECT_TRUE(r["id"].is_null());
  }
}

TEST(JsonRpcTest, InvalidRequests) {
  FakeHandler h;
  EXPECT_EQ(ErrorCode(Reply(h, R"({"id":1,"method":"echo"})")), -32600);  // no jsonrpc
  EXPECT_EQ(ErrorCode(Reply(h, R"({"jsonrpc":"1.0","id":1,"method":"echo"})")), -32600);
  EXPECT_EQ(ErrorCode(Reply(h, R"({"jsonrpc":"2.0","id":1})")), -32600);  // no method
  EXPECT_EQ(ErrorCode(Reply(h, R"({"jsonrpc":"2.0","id":1,"method":5})")), -32600);
  EXPECT_EQ(ErrorCode(Reply(h, R"({"jsonrpc":"2.0","id":1,"method":"echo","params":3})")), -32600);
  EXPECT_EQ(ErrorCode(Reply(h, R"({"jsonrpc":"2.0","id":null,"method":"echo"})")), -32600);
  EXPECT_EQ(ErrorCode(Reply(h, R"({"jsonrpc":"2.0","id":{"x":1},"method":"echo"})")), -32600);
  EXPECT_EQ(ErrorCode(Reply(h, R"("just a string")")), -32600);
  EXPECT_EQ(ErrorCode(Reply(h, "42")), -32600);
  // The id is echoed when it is valid.
  EXPECT_EQ(Reply(h, R"({"jsonrpc":"2.0","id":9,"method":5})")["id"], 9);
}

TEST(JsonRpcTest, UnknownMethodAndBadParamsPassThrough) {
  FakeHandler h;
  EXPECT_EQ(ErrorCode(Reply(h, R"({"jsonrpc":"2.0","id":1,"method":"nope"})")), -32601);
  EXPECT_EQ(ErrorCode(Reply(h, R"({"jsonrpc":"2.0","id":1,"method":"bad_params"})")), -32602);
}

TEST(JsonRpcTest, HandlerExceptionsBecomeInternalErrors) {
  FakeHandler h;
  Json r = Reply(h, R"({"jsonrpc":"2.0","id":1,"method":"throw"})");
  EXPECT_EQ(ErrorCode(r), -32603);
  EXPECT_EQ(r["id"], 1);
  EXPECT_EQ(ErrorCode(Reply(h, R"({"jsonrpc":"2.0","id":2,"method":"json_throw"})")), -32603);
}

TEST(JsonRpcTest, NotificationsGetNoReplyEvenWhenTheyFail) {
  FakeHandler h;
  EXPECT_EQ(HandleMessage(h, R"({"jsonrpc":"2.0","method":"notifications/initialized"})"), "");
  EXPECT_EQ(HandleMessage(h, R"({"jsonrpc":"2.0","method":"throw"})"), "");
  EXPECT_EQ(HandleMessage(h, R"({"jsonrpc":"2.0","method":"x","params":7})"), "");
  ASSERT_EQ(h.notifications.size(), 2u);
  EXPECT_EQ(h.notifications[0], "notifications/initialized");
}

TEST(JsonRpcTest, ResponsesFromTheClientAreNotAnswered) {
  FakeHandler h;
  EXPECT_EQ(HandleMessage(h, R"({"jsonrpc":"2.0","id":3,"result":{}})"), "");
  EXPECT_EQ(HandleMessage(h, R"({"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m"}})"), "");
}

TEST(JsonRpcTest, BatchesOnlyWhenAllowed) {
  FakeHandler h;
  const char* batch = R"([{"jsonrpc":"2.0","id":1,"method":"echo"},{"jsonrpc":"2.0","method":"n"},)"
                      R"({"jsonrpc":"2.0","id":2,"method":"nope"}])";
  EXPECT_EQ(ErrorCode(Reply(h, batch)), -32600);
  h.batches = true;
  Json r = Reply(h, batch);
  ASSERT_TRUE(r.is_array());
  ASSERT_EQ(r.size(), 2u);  // the notification gets no entry
  EXPECT_EQ(r[0]["id"], 1);
  EXPECT_EQ(ErrorCode(r[1]), -32601);
  EXPECT_EQ(ErrorCode(Reply(h, "[]")), -32600);
  EXPECT_EQ(HandleMessage(h, R"([{"jsonrpc":"2.0","method":"n"}])"), "");
}

TEST(JsonRpcTest, DeepNestingIsRefusedBeforeParsing) {
  FakeHandler h;
  std::string deep = R"({"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":)" +
                     std::string(100000, '[') + std::string(100000, ']') + "}}";
  EXPECT_EQ(ErrorCode(Reply(h, deep)), -32600);
  // Brackets inside strings do not count.
  std::string in_string = R"({"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":")" +
                          std::string(1000, '[') + R"("}})";
  EXPECT_EQ(Reply(h, in_string)["id"], 1);
  EXPECT_EQ(NestingDepth(R"({"a":"\"[[[","b":[1]})"), 2);
}

TEST(JsonRpcTest, InvalidUtf8InResultsIsReplacedNotThrown) {
  Json j = Json::object();
  j["name"] = std::string("evil\xff\xfe name");
  std::string out = SerializeJson(j);
  EXPECT_NE(out.find("evil"), std::string::npos);
  Json parsed;
  EXPECT_NO_THROW(parsed = Json::parse(out));
  EXPECT_TRUE(parsed.is_object());
}

// ---- LineReader ----

class LineReaderTest : public ::testing::Test {
 protected:
  int FdWith(const std::string& content) {
    char path[] = "/tmp/gw_line_reader_XXXXXX";
    int fd = mkstemp(path);
    EXPECT_GE(fd, 0);
    unlink(path);
    EXPECT_EQ(write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
    lseek(fd, 0, SEEK_SET);
    fds_.push_back(fd);
    return fd;
  }
  void TearDown() override {
    for (int fd : fds_) close(fd);
  }
  std::vector<int> fds_;
};

TEST_F(LineReaderTest, SplitsLinesSkipsBlanksAndStripsCr) {
  LineReader r(FdWith("a\r\n\n  \nb\nc"), 100);
  LineItem i = r.Next();
  EXPECT_EQ(i.kind, LineKind::kLine);
  EXPECT_EQ(i.text, "a");
  EXPECT_EQ(r.Next().text, "b");
  EXPECT_EQ(r.Next().text, "c");  // last line without newline
  EXPECT_EQ(r.Next().kind, LineKind::kEof);
}

TEST_F(LineReaderTest, OversizedLineIsDiscardedAndTheNextOneRead) {
  const size_t kCap = 1000;
  std::string huge(3 * 1024 * 1024, 'x');  // many read chunks, no newline for a long time
  LineReader r(FdWith("ok1\n" + huge + "\nok2\n" + std::string(kCap + 1, 'y') + "\n" +
                      std::string(kCap, 'z') + "\n"),
               kCap);
  EXPECT_EQ(r.Next().text, "ok1");
  LineItem big = r.Next();
  EXPECT_EQ(big.kind, LineKind::kTooLong);
  EXPECT_EQ(big.discarded_bytes, huge.size());
  EXPECT_EQ(r.Next().text, "ok2");
  LineItem just_over = r.Next();
  EXPECT_EQ(just_over.kind, LineKind::kTooLong);
  EXPECT_EQ(just_over.discarded_bytes, kCap + 1);
  LineItem at_cap = r.Next();
  EXPECT_EQ(at_cap.kind, LineKind::kLine);
  EXPECT_EQ(at_cap.text.size(), kCap);
  EXPECT_EQ(r.Next().kind, LineKind::kEof);
}

TEST_F(LineReaderTest, OversizedLastLineWithoutNewline) {
  LineReader r(FdWith(std::string(5000, 'q')), 100);
  LineItem i = r.Next();
  EXPECT_EQ(i.kind, LineKind::kTooLong);
  EXPECT_EQ(i.discarded_bytes, 5000u);
  EXPECT_EQ(r.Next().kind, LineKind::kEof);
}

}  // namespace
}  // namespace gw::mcp
