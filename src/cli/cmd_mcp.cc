// gpuwhy mcp: a Model Context Protocol server over stdio, so an AI assistant can investigate a
// recording with tools (src/mcp). stdout carries only protocol messages; logs go to stderr.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "check/checks.h"
#include "cli/commands.h"
#include "mcp/gpuwhy_server.h"
#include "store/reader.h"

namespace gw {

namespace {

constexpr int kCheckTimeoutMs = 60'000;

// "explain, query_sql, …" as the server offers them, wrapped for --help: the list is the
// server's own, so it cannot fall behind it.
std::string NamesForHelp(const std::vector<std::string>& names, size_t indent) {
  std::string out, line;
  for (size_t i = 0; i < names.size(); ++i) {
    std::string word = names[i] + (i + 1 < names.size() ? "," : "");
    if (!line.empty() && indent + line.size() + 1 + word.size() > 88) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return out + line;
}

}  // namespace

int RunMcp(const Args& args) {
  mcp::GpuwhyServer listing({});  // opens nothing: only what it offers is read
  const std::vector<std::string> tools = listing.server().tool_names();
  const std::vector<std::string> prompts = listing.server().prompt_names();
  FlagSet flags("mcp", "gpuwhy mcp [--db PATH]",
                "Serves a recording to an AI assistant over the Model Context Protocol (stdio,\n"
                "one JSON-RPC message per line). " + std::to_string(tools.size()) +
                    " tools:\n" + NamesForHelp(tools, 0) + ";\nprompt" +
                    (prompts.size() == 1 ? "" : "s") + ": " + NamesForHelp(prompts, 8) +
                    ".\nThe database is opened read-only; see src/mcp/README.md to register the\n"
                    "server with Claude Desktop, Claude Code, VS Code or Cursor.");
  AddDbFlag(flags);
  flags.Add({"max-message", FlagKind::kSize, "SIZE", "largest JSON-RPC message accepted", "1M"})
      .Add({"timeout", FlagKind::kDuration, "DUR", "default per-statement time limit of query_sql",
            "10s"})
      .Add({"diff-dir", FlagKind::kString, "DIR",
            "the diff tool may open databases here too (it always may in --db's directory)", ""});
  int code = 0;
  if (!ParseOrExit(flags, args, &code)) return code;
  if (!flags.positionals().empty()) {
    std::fprintf(stderr, "gpuwhy mcp: unexpected argument '%s'\n%s", flags.positionals()[0].c_str(),
                 flags.HelpText().c_str());
    return kExitUsage;
  }
  mcp::StdioOptions stdio;
  stdio.max_message_bytes =
      static_cast<size_t>(flags.GetSizeBytes("max-message", mcp::kMaxMessageBytes));
  if (stdio.max_message_bytes < 1024) {
    std::fprintf(stderr, "gpuwhy mcp: --max-message must be at least 1K\n");
    return kExitUsage;
  }
  mcp::GpuwhyServerOptions options;
  options.db_path = DatabasePath(flags);
  options.diff_dir = flags.GetString("diff-dir");
  options.version = VersionString();
  options.limits.default_timeout_ms = flags.GetDurationNs("timeout", 10'000'000'000) / 1'000'000;
  if (options.limits.default_timeout_ms < 1 ||
      options.limits.default_timeout_ms > options.limits.max_timeout_ms) {
    std::fprintf(stderr, "gpuwhy mcp: --timeout must be between 1ms and %llds\n",
                 static_cast<long long>(options.limits.max_timeout_ms / 1000));
    return kExitUsage;
  }
  // In a child: the checks must not write to stdout (the protocol channel) or take the server
  // down.
  options.run_checks = [] { return RunChecksInChild(CheckOptions{}, kCheckTimeoutMs); };
  // A client that goes away must end the server with EPIPE, not a signal.
  signal(SIGPIPE, SIG_IGN);
  StoreReader::LimitProcessHeap();  // one query_sql call must not exhaust the server's memory
  mcp::GpuwhyServer server(options);
  std::fprintf(stderr, "gpuwhy mcp: serving %s over stdio (MCP %s)\n", options.db_path.c_str(),
               mcp::kLatestProtocolVersion);
  Status st = mcp::ServeStdio(server.server(), STDIN_FILENO, STDOUT_FILENO, stdio);
  if (!st.ok()) return ReportError(st);
  return kExitOk;
}

}  // namespace gw
