// gpuwhy mcp: a Model Context Protocol server over stdio, so an AI assistant can investigate a
// recording with tools (src/mcp). stdout carries only protocol messages; logs go to stderr.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>

#include "base/scoped.h"
#include "cli/commands.h"
#include "mcp/gpuwhy_server.h"
#include "store/reader.h"

namespace gw {

namespace {

constexpr int kCheckTimeoutMs = 60'000;

// Runs `gpuwhy check --json` in a forked child (the check code prints to stdout, which here is
// the protocol channel) and returns what it printed.
StatusOr<std::string> RunChecksInChild() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("check: create pipe", errno);
  ScopedFd read_end(fds[0]);
  ScopedFd write_end(fds[1]);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return ErrnoStatus("check: fork", errno);
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    if (dup2(write_end.get(), STDOUT_FILENO) < 0) _exit(kExitError);
    int code = RunCheck({"--json"});
    std::fflush(stdout);
    _exit(code);
  }
  write_end.Reset();
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kCheckTimeoutMs);
  bool timed_out = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p = {read_end.get(), POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    char buf[8192];
    ssize_t n = read(read_end.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() < (1u << 20)) out.append(buf, static_cast<size_t>(n));
  }
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return Unavailable("check: the checks did not finish within " +
                       std::to_string(kCheckTimeoutMs / 1000) + " s");
  }
  if (out.empty()) return Internal("check: `gpuwhy check --json` printed nothing");
  return out;
}

}  // namespace

int RunMcp(const Args& args) {
  FlagSet flags("mcp", "gpuwhy mcp [--db PATH]",
                "Serves a recording to an AI assistant over the Model Context Protocol (stdio,\n"
                "one JSON-RPC message per line). Tools: explain, query_sql, op_stats,\n"
                "top_contention, timeline, stacks, sessions, check, diff; prompt: investigate.\n"
                "The database is opened read-only; see src/mcp/README.md to register the\n"
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
  options.run_checks = RunChecksInChild;
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
