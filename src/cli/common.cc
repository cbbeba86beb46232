#include <cstdio>

#include "cli/commands.h"
#include "store/writer.h"

namespace gw {

namespace {
std::string g_command_line;
}

int ReportError(const Status& status) {
  std::fprintf(stderr, "gpuwhy: error: %s\n", status.message().c_str());
  return status.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitError;
}

bool ParseOrExit(FlagSet& flags, const Args& args, int* exit_code) {
  Status st = flags.Parse(args);
  if (flags.help_requested()) {
    std::fputs(flags.HelpText().c_str(), stdout);
    *exit_code = kExitOk;
    return false;
  }
  if (st.ok() && flags.Has("db") && flags.GetString("db").empty()) {
    // An empty --db (an unset shell variable) must not silently mean the default file.
    st = InvalidArgument("--db needs a file name, got an empty value — hint: leave --db out for "
                         "the default database");
  }
  if (!st.ok()) {
    std::fprintf(stderr, "gpuwhy %s: %s\n", flags.command().c_str(), st.message().c_str());
    *exit_code = kExitUsage;
    return false;
  }
  return true;
}

void AddDbFlag(FlagSet& flags) {
  flags.Add({"db", FlagKind::kString, "PATH",
             "database file ($GPUWHY_DB, else ~/.gpuwhy/gpuwhy.db of the invoking user)", ""});
}

std::string DatabasePath(const FlagSet& flags) {
  std::string db = flags.GetString("db");
  return db.empty() ? DefaultDatabasePath() : db;
}

std::string VersionString() { return GPUWHY_VERSION; }

std::string CommandLine() { return g_command_line; }

void SetCommandLine(int argc, char** argv) {
  g_command_line.clear();
  for (int i = 0; i < argc; ++i) {
    if (i) g_command_line += ' ';
    g_command_line += argv[i];
  }
}

}  // namespace gw
