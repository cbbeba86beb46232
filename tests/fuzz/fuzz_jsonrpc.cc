// libFuzzer target: the MCP stdio path up to the handler — the size-capped line reader over a
// memfd holding the input, then JSON-RPC envelope handling of every line (nlohmann's parser,
// batches, ids, errors). Invariant: every reply is valid JSON; no crash or UB.
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int fd = memfd_create("fuzz", 0);
  if (fd < 0) return 0;
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  lseek(fd, 0, SEEK_SET);
  gw::mcp::LineReader reader(fd, 4096);
  EchoHandler handler;
  for (int i = 0; i < 64; ++i) {
    gw::mcp::LineItem item = reader.Next();
    if (item.kind == gw::mcp::LineKind::kEof || item.kind == gw::mcp::LineKind::kError) break;
    if (item.kind != gw::mcp::LineKind::kLine) continue;
    std::string reply = gw::mcp::HandleMessage(handler, item.text);
    if (!reply.empty() && !gw::mcp::Json::accept(reply)) __builtin_trap();
  }
  return 0;
}
