#include <cstdio>

#include "base/text.h"
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

void AddOutputFlags(FlagSet& flags) {
  flags.Add({"output", FlagKind::kString, "FILE", "file to write (- = standard output)", ""})
      .Add({"o", FlagKind::kString, "FILE", "the same as --output", ""});
}

std::string OutputPath(const FlagSet& flags, std::string* error) {
  if (flags.Has("output") && flags.Has("o")) {
    *error = "give one of -o and --output";
    return "";
  }
  std::string path = flags.Has("o") ? flags.GetString("o") : flags.GetString("output");
  if (path.empty()) *error = "-o FILE is required (- writes to standard output)";
  return path;
}

std::string DatabasePath(const FlagSet& flags) {
  std::string db = flags.GetString("db");
  return db.empty() ? DefaultDatabasePath() : db;
}

std::string HumanBytes(int64_t bytes) {
  static const char* const kUnits[] = {"KB", "MB", "GB", "TB"};
  if (bytes < 1000) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int unit = -1;
  while (v >= 1000 && unit < 3) {
    v /= 1000;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  return buf;
}

std::string HumanSpan(int64_t ns) {
  if (ns < 0) ns = 0;
  char buf[32];
  int64_t s = ns / 1'000'000'000;
  if (ns < 1'000'000'000) {
    std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(ns / 1'000'000));
  } else if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ns) / 1e9);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm %llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh %lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldd %lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s / 3600 % 24));
  }
  return buf;
}

std::string VersionString() { return GPUWHY_VERSION; }

std::string CommandLine() { return g_command_line; }

void SetCommandLine(int argc, char** argv) {
  g_command_line.clear();
  for (int i = 0; i < argc; ++i) {
    if (i) g_command_line += ' ';
    g_command_line += argv[i];
  }
  // Stored in sessions.command_line, sent to ClickHouse, shown by sessions and MCP: never with
  // the password of a URL given on the command line, nor the traced job's secrets.
  g_command_line = RedactCredentials(g_command_line);
}

}  // namespace gw
