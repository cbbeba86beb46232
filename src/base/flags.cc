#include "base/flags.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "base/text.h"

namespace gw {

FlagSet& FlagSet::Add(FlagSpec spec) {
  specs_.push_back(std::move(spec));
  return *this;
}

const FlagSpec* FlagSet::Find(const std::string& name) const {
  for (const FlagSpec& s : specs_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// How a flag is written: one dash for a one-letter name (-o), two for the rest (--output).
// Parse accepts either for both; help and errors show the usual one.
static std::string Dashed(const std::string& name) {
  return (name.size() == 1 ? "-" : "--") + name;
}

static Status ValidateValue(const FlagSpec& spec, const std::string& value) {
  switch (spec.kind) {
    case FlagKind::kBool:
      if (value == "true" || value == "false" || value == "1" || value == "0") return Status::Ok();
      return InvalidArgument(Dashed(spec.name) + " takes true or false, not '" + value + "'");
    case FlagKind::kString:
      return Status::Ok();
    case FlagKind::kInt:
      return ParseInt(value).status().WithContext(Dashed(spec.name));
    case FlagKind::kDuration:
      return ParseDurationNs(value).status().WithContext(Dashed(spec.name));
    case FlagKind::kSize:
      return ParseSizeBytes(value).status().WithContext(Dashed(spec.name));
  }
  return Status::Ok();
}

Status FlagSet::Parse(const std::vector<std::string>& args) {
  const FlagSpec* bare_bool = nullptr;  // the previous word: a boolean flag without "=value"
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      help_ = true;
      continue;
    }
    if (arg == "--") {
      for (size_t j = i + 1; j < args.size(); ++j) positionals_.push_back(args[j]);
      break;
    }
    if (arg.size() < 2 || arg[0] != '-' || arg == "-") {
      // "--record false" would otherwise set --record and leave "false" behind as a word.
      if (bare_bool != nullptr && (arg == "true" || arg == "false" || arg == "0" ||
                                   arg == "1")) {
        return InvalidArgument("--" + bare_bool->name + " is a boolean flag: its value goes after "
                               "'=' — hint: --" + bare_bool->name + "=" + arg);
      }
      bare_bool = nullptr;
      positionals_.push_back(arg);
      continue;
    }
    std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    std::string name = body;
    std::string value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    const FlagSpec* spec = Find(name);
    if (spec == nullptr) {
      std::vector<std::string> names;
      for (const FlagSpec& s : specs_) names.push_back(s.name);
      std::string guess = ClosestWord(name, names);
      return InvalidArgument("unknown flag '" + TerminalSafe(arg) + "' for '" + command_ + "'" +
                             (guess.empty() ? "" : " — did you mean " + Dashed(guess) + "?") +
                             " — hint: gpuwhy " + command_ + " --help lists its flags");
    }
    bare_bool = nullptr;
    if (!has_value) {
      if (spec->kind == FlagKind::kBool) {
        value = "true";
        bare_bool = spec;
      } else {
        if (i + 1 >= args.size()) {
          return InvalidArgument("flag " + Dashed(name) + " needs a value (" + spec->value_name +
                                 ")");
        }
        value = args[++i];
      }
    }
    RETURN_IF_ERROR(ValidateValue(*spec, value));
    values_[name] = value;
  }
  return Status::Ok();
}

std::string FlagSet::HelpText() const {
  std::string out = "Usage: " + usage_ + "\n\n" + summary_ + "\n";
  if (!specs_.empty()) out += "\nFlags:\n";
  for (const FlagSpec& s : specs_) {
    std::string left = "  " + Dashed(s.name);
    if (s.kind != FlagKind::kBool) left += " " + s.value_name;
    if (left.size() < 24) left.append(24 - left.size(), ' ');
    else left += "  ";
    out += left + s.help;
    if (!s.default_text.empty()) out += " (default " + s.default_text + ")";
    out += "\n";
  }
  out += "  -h, --help            show this help\n";  // the flags' 24-column left side
  return out;
}

std::string FlagSet::GetString(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

bool FlagSet::GetBool(const std::string& name, bool def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  return it->second == "true" || it->second == "1";
}

int64_t FlagSet::GetInt(const std::string& name, int64_t def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  return ParseInt(it->second).value();
}

int64_t FlagSet::GetDurationNs(const std::string& name, int64_t def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  return ParseDurationNs(it->second).value();
}

int64_t FlagSet::GetSizeBytes(const std::string& name, int64_t def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  return ParseSizeBytes(it->second).value();
}

StatusOr<int64_t> ParseInt(const std::string& text) {
  if (text.empty()) return InvalidArgument("expected a whole number, got an empty value");
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == nullptr || *end != '\0') {
    return InvalidArgument("expected a whole number, got '" + text + "'");
  }
  return static_cast<int64_t>(v);
}

StatusOr<int64_t> ParseDurationNs(const std::string& text) {
  const std::string bad = "expected a duration like 120s, 2m, 1h or 500ms, got '" + text + "'";
  if (text.empty()) return InvalidArgument(bad);
  size_t i = 0;
  double total_ns = 0;
  bool any = false;
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    if (i == start) return InvalidArgument(bad);
    std::string digits = text.substr(start, i - start);
    // One decimal point at most, and digits around it: "1.2.3s" and "." are not numbers.
    if (std::count(digits.begin(), digits.end(), '.') > 1 || digits == ".") {
      return InvalidArgument(bad);
    }
    double number = std::strtod(digits.c_str(), nullptr);
    size_t unit_start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    std::string unit = text.substr(unit_start, i - unit_start);
    double scale = 0;
    if (unit.empty() || unit == "s") scale = 1e9;
    else if (unit == "ms") scale = 1e6;
    else if (unit == "us") scale = 1e3;
    else if (unit == "ns") scale = 1;
    else if (unit == "m") scale = 60e9;
    else if (unit == "h") scale = 3600e9;
    else if (unit == "d") scale = 86400e9;
    else return InvalidArgument(bad);
    if (unit.empty() && i != text.size()) return InvalidArgument(bad);
    total_ns += number * scale;
    any = true;
  }
  if (!any || total_ns < 0 || total_ns > 9e18) return InvalidArgument(bad);
  return static_cast<int64_t>(total_ns);
}

StatusOr<int64_t> ParseSizeBytes(const std::string& text) {
  const std::string bad = "expected a size like 512M, 2G or 100000, got '" + text + "'";
  if (text.empty()) return InvalidArgument(bad);
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return InvalidArgument(bad);
  std::string digits = text.substr(0, i);
  if (std::count(digits.begin(), digits.end(), '.') > 1 || digits == ".") {
    return InvalidArgument(bad);
  }
  double number = std::strtod(digits.c_str(), nullptr);
  std::string unit = text.substr(i);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!unit.empty() && unit.back() == 'B') unit.pop_back();
  if (!unit.empty() && unit.back() == 'I') unit.pop_back();  // "MiB" → "M"
  double scale = 1;
  if (unit.empty()) scale = 1;
  else if (unit == "K") scale = 1024.0;
  else if (unit == "M") scale = 1024.0 * 1024;
  else if (unit == "G") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  else return InvalidArgument(bad);
  // Past 2^62 bytes the cast to int64 would be undefined; no disk is that large anyway.
  if (number * scale > 4.6e18) {
    return InvalidArgument("size '" + text + "' is too large (at most 4E, 2^62 bytes)");
  }
  return static_cast<int64_t>(number * scale);
}

}  // namespace gw
