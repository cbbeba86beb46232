// libFuzzer target: the MCP stdio path up to the handler — the size-capped line reader over a
// memfd holding the input, then JSON-RPC envelope handling of every line (nlohmann's parser,
// batches, ids, errors), with request hooks that cancel some requests as the stdio transport
// does, and the reader thread's search for notifications/cancelled. Invariants: every reply is
// valid JSON; a reply to a single request carries the request's id (echoed as written, it must
// parse to the same value); no crash or UB.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "mcp/json_rpc.h"
#include "mcp/line_reader.h"

namespace {

class EchoHandler : public gw::mcp::RpcHandler {
 public:
  gw::mcp::RpcResult HandleRequest(const std::string& method, const gw::mcp::Json& params) override {
    if (method == "fail") return gw::mcp::RpcError{gw::mcp::RpcErrorCode::kInvalidParams, "no", nullptr};
    return params;
  }
  void HandleNotification(const std::string&, const gw::mcp::Json&) override {}
  bool BatchesAllowed() const override { return true; }
};

// Cancels every third request, one before it runs and one while it runs.
class SomeCancelled : public gw::mcp::RequestHooks {
 public:
  bool Begin(const gw::mcp::Json&, const std::string&) override { return ++n_ % 3 != 1; }
  bool End() override { return n_ % 3 != 2; }

 private:
  int n_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int fd = memfd_create("fuzz", 0);
  if (fd < 0) return 0;
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  lseek(fd, 0, SEEK_SET);
  gw::mcp::LineReader reader(fd, 4096);
  EchoHandler handler;
  SomeCancelled hooks;
  for (int i = 0; i < 64; ++i) {
    gw::mcp::LineItem item = reader.Next();
    if (item.kind == gw::mcp::LineKind::kEof || item.kind == gw::mcp::LineKind::kError) break;
    if (item.kind != gw::mcp::LineKind::kLine) continue;
    bool only_cancellation = false;
    (void)gw::mcp::CancelledRequestIds(item.text, &only_cancellation);
    std::string reply = gw::mcp::HandleMessage(handler, item.text, i % 2 ? &hooks : nullptr);
    if (reply.empty()) continue;
    gw::mcp::Json parsed = gw::mcp::Json::parse(reply, nullptr, false);
    if (parsed.is_discarded()) __builtin_trap();
    if (!parsed.is_object() || !parsed.contains("result")) continue;
    gw::mcp::Json request = gw::mcp::Json::parse(item.text, nullptr, false);
    if (request.is_discarded() || !request.is_object()) __builtin_trap();  // answered junk
    if (parsed["id"] != request["id"]) __builtin_trap();
  }
  return 0;
}
