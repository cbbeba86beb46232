// Assembles the gpuwhy MCP server (tools, the `investigate` prompt, instructions) and serves
// it over stdio. Front end: src/cli/cmd_mcp.cc (`gpuwhy mcp`).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "check/check_report.h"
#include "mcp/server.h"
#include "mcp/store_tools.h"

namespace gw::mcp {

// Runs the machine checks of `gpuwhy check` (src/check). Supplied by the CLI, which links the
// sources the checks probe; absent in tests.
using CheckRunner = std::function<StatusOr<CheckReport>()>;

struct GpuwhyServerOptions {
  std::string db_path;
  std::string diff_dir;  // diff may also open databases under this directory
  std::string version;
  StoreToolLimits limits;
  CheckRunner run_checks;
};

// Owns the database handle the tools share, and the server.
class GpuwhyServer {
 public:
  explicit GpuwhyServer(GpuwhyServerOptions options);
  McpServer& server() { return server_; }

 private:
  GpuwhyServerOptions options_;
  ReaderSource source_;
  McpServer server_;
};

inline constexpr size_t kMaxMessageBytes = 1 << 20;  // 1 MiB per JSON-RPC message

struct StdioOptions {
  size_t max_message_bytes = kMaxMessageBytes;
};

// Reads one JSON-RPC message per line from in_fd and writes replies, one per line, to out_fd
// until EOF. Returns an error only when the output cannot be written or input cannot be read.
Status ServeStdio(McpServer& server, int in_fd, int out_fd, const StdioOptions& options = {});

}  // namespace gw::mcp
