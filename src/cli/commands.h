// The gpuwhy commands. Each lives in cmd_<name>.cc and is registered in commands.cc.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/flags.h"
#include "base/status.h"
#include "base/table.h"
#include "clickhouse/import.h"

namespace gw {

using Args = std::vector<std::string>;

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const Args& args);
};

const std::vector<Command>& AllCommands();

int RunCheck(const Args& args);
int RunDemo(const Args& args);
int RunDiff(const Args& args);
int RunExplain(const Args& args);
int RunFleet(const Args& args);
int RunExport(const Args& args);
int RunMcp(const Args& args);
int RunPrune(const Args& args);
int RunQuery(const Args& args);
int RunReport(const Args& args);
int RunSessions(const Args& args);
int RunTrace(const Args& args);
int RunVersion(const Args& args);

// Exit codes shared by every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

// Prints "gpuwhy: error: <message>" to stderr and returns the matching exit code.
int ReportError(const Status& status);
// Parses flags; on --help prints help and sets *exit_code = 0; on a usage error prints it and
// sets *exit_code = 2. Returns true when the command should proceed.
bool ParseOrExit(FlagSet& flags, const Args& args, int* exit_code);

// explain's flags (--since, --from, --to, --session, --pid, --evidence, --json), shared with
// demo, and the options they give (the window: store/window.h's WindowRequest).
struct ExplainOptions;
// output_flags = false leaves out --evidence and --json (commands that write a file).
void AddExplainWindowFlags(FlagSet& flags, bool output_flags = true);
StatusOr<ExplainOptions> ExplainOptionsFromFlags(const FlagSet& flags);

// -o FILE / --output FILE of the commands that write a file, and the path they give: "" with
// *error set when both or neither were given.
void AddOutputFlags(FlagSet& flags);
std::string OutputPath(const FlagSet& flags, std::string* error);

// --clickhouse URL and --node NAME of the commands that can read ClickHouse (cmd_fleet.cc).
void AddClickHouseFlags(FlagSet& flags, const char* node_help);
// One node's session from ClickHouse, replayed into a scratch file that goes with the value.
struct ImportedNode {
  ScratchDir dir;
  std::string db_path;
  ImportResult result;
  std::string source;  // the ClickHouse URL without its password
};
StatusOr<ImportedNode> ImportClickHouseNode(const FlagSet& flags, int64_t session,
                                            std::optional<int64_t> since_ns);
// `query --clickhouse`: the SQL runs in ClickHouse (the node's views with --node), read-only.
int RunClickHouseQuery(const FlagSet& flags, const std::string& sql, TableFormat format,
                       int64_t limit, int64_t timeout_ms);

// --db PATH (and GPUWHY_DB / ~/.gpuwhy/gpuwhy.db).
void AddDbFlag(FlagSet& flags);
std::string DatabasePath(const FlagSet& flags);

// 1.5 GB, 12.0 MB, 640 KB, 512 B (decimal units, as df -H and the docs use).
std::string HumanBytes(int64_t bytes);
// 2h 5m, 3m 20s, 45.2s, 850ms.
std::string HumanSpan(int64_t ns);

std::string VersionString();
// The command line as typed, for the sessions table.
std::string CommandLine();
void SetCommandLine(int argc, char** argv);

}  // namespace gw
