// A small declarative command-line parser shared by every gpuwhy command.
//
// A command declares its flags (name, value kind, help) once; Parse() fills them in and the
// same declarations produce the command's --help text, so help can never drift from parsing.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace gw {

enum class FlagKind { kBool, kString, kInt, kDuration, kSize };

struct FlagSpec {
  std::string name;  // without the leading dashes, e.g. "db"
  FlagKind kind = FlagKind::kString;
  std::string value_name;  // shown in help, e.g. "PATH"
  std::string help;
  std::string default_text;  // shown in help when non-empty
};

class FlagSet {
 public:
  FlagSet(std::string command, std::string usage, std::string summary)
      : command_(std::move(command)), usage_(std::move(usage)), summary_(std::move(summary)) {}

  FlagSet& Add(FlagSpec spec);

  // Parses argv (after the command name). "--name value", "--name=value", "--bool",
  // "--bool=false" are accepted. Non-flag words are collected as positionals. "--help"/"-h"
  // sets help_requested().
  Status Parse(const std::vector<std::string>& args);

  bool help_requested() const { return help_; }
  std::string HelpText() const;
  const std::string& command() const { return command_; }

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string GetString(const std::string& name, const std::string& def = "") const;
  bool GetBool(const std::string& name, bool def = false) const;
  int64_t GetInt(const std::string& name, int64_t def = 0) const;
  // Durations are returned in nanoseconds, sizes in bytes (already validated by Parse).
  int64_t GetDurationNs(const std::string& name, int64_t def = 0) const;
  int64_t GetSizeBytes(const std::string& name, int64_t def = 0) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  const FlagSpec* Find(const std::string& name) const;

  std::string command_;
  std::string usage_;
  std::string summary_;
  std::vector<FlagSpec> specs_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positionals_;
  bool help_ = false;
};

// "120s", "2m", "1h30m", "500ms", "250us", "100ns"; a bare number means seconds.
StatusOr<int64_t> ParseDurationNs(const std::string& text);
// "512M", "2G", "100k", "1024" (bytes); binary multiples (K=1024).
StatusOr<int64_t> ParseSizeBytes(const std::string& text);
StatusOr<int64_t> ParseInt(const std::string& text);

}  // namespace gw
