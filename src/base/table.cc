#include "base/table.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "base/text.h"

namespace gw {

std::string WithThousands(int64_t v) {
  uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string digits = std::to_string(magnitude);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

static std::string FormatReal(double d, bool human) {
  char buf[64];
  if (!std::isfinite(d)) return std::isnan(d) ? "NaN" : (d > 0 ? "Inf" : "-Inf");
  if (!human) {
    std::snprintf(buf, sizeof buf, "%.17g", d);
    return buf;
  }
  // Never scientific notation: big values whole, small ones with 3 significant digits.
  double a = std::fabs(d);
  if (a >= 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", d);
  } else if (a >= 1 || a == 0) {
    std::snprintf(buf, sizeof buf, "%.1f", d);
  } else {
    int decimals = std::min(20, 2 - static_cast<int>(std::floor(std::log10(a))));
    std::snprintf(buf, sizeof buf, "%.*f", decimals, d);
  }
  return buf;
}

// Columns that hold identifiers or points in time (pid, session, timestamp, wall_start_ns…):
// their integers read better without thousands separators, which are for counts and amounts.
static bool IsIdentifierColumn(const std::string& column) {
  std::string c;
  for (char ch : column) c += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  static const char* const kExact[] = {"id", "pid", "tid", "ppid", "session", "ts", "timestamp",
                                       "sec", "window_sec", "cpu", "addr", "ret", "kind",
                                       "depth", "line", "offset", "exit_code"};
  for (const char* e : kExact) {
    if (c == e) return true;
  }
  auto ends = [&](const char* suffix) {
    std::string sfx = suffix;
    return c.size() >= sfx.size() && c.compare(c.size() - sfx.size(), sfx.size(), sfx) == 0;
  };
  return ends("_id") || ends("_pid") || ends("_tid") || ends("_ts") ||
         c.rfind("wall_", 0) == 0 || c.rfind("mono_", 0) == 0 || c.find("start") != std::string::npos ||
         c.find("stop") != std::string::npos;
}

std::string CellToText(const Cell& cell, bool human) {
  if (std::holds_alternative<std::monostate>(cell)) return human ? "" : "";
  if (const auto* i = std::get_if<int64_t>(&cell)) return human ? WithThousands(*i) : std::to_string(*i);
  if (const auto* d = std::get_if<double>(&cell)) return FormatReal(*d, human);
  return std::get<std::string>(cell);
}

std::string JsonEscape(const std::string& text) {
  // JSON must be UTF-8: bytes from traced processes that are not become U+FFFD first.
  const std::string s = ValidUtf8(text);
  std::string out;
  out.reserve(s.size() + 2);
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    unsigned char next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
    if (c == 0xC2 && next >= 0x80 && next <= 0x9F) {  // a C1 control: escaped like C0
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", next);
      out += buf;
      ++i;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string CsvField(const std::string& text) {
  // Line feeds stay inside the quotes; escapes and other controls do not reach the terminal.
  const std::string s = TerminalSafe(text, /*keep_line_breaks=*/true);
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// Text from traced processes cannot move the cursor (C0, DEL, C1 controls) nor break UTF-8.
static std::string Printable(const std::string& s) { return TerminalSafe(s); }

static size_t DisplayWidth(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++w;  // count UTF-8 lead bytes only
  }
  return w;
}

std::string FormatTable(const Table& table, TableFormat format) {
  std::string out;
  switch (format) {
    case TableFormat::kCsv: {
      for (size_t c = 0; c < table.columns.size(); ++c) {
        out += (c ? "," : "") + CsvField(table.columns[c]);
      }
      out += "\n";
      for (const auto& row : table.rows) {
        for (size_t c = 0; c < row.size(); ++c) out += (c ? "," : "") + CsvField(CellToText(row[c], false));
        out += "\n";
      }
      return out;
    }
    case TableFormat::kJson: {
      out += "[";
      for (size_t r = 0; r < table.rows.size(); ++r) {
        out += r ? ",\n {" : "\n {";
        for (size_t c = 0; c < table.columns.size(); ++c) {
          if (c) out += ", ";
          out += "\"" + JsonEscape(table.columns[c]) + "\": ";
          const Cell& cell = table.rows[r][c];
          if (std::holds_alternative<std::monostate>(cell)) {
            out += "null";
          } else if (const auto* s = std::get_if<std::string>(&cell)) {
            out += "\"" + JsonEscape(*s) + "\"";
          } else if (const auto* d = std::get_if<double>(&cell); d && !std::isfinite(*d)) {
            out += "null";
          } else {
            out += CellToText(cell, false);
          }
        }
        out += "}";
      }
      out += table.rows.empty() ? "]\n" : "\n]\n";
      return out;
    }
    case TableFormat::kText: {
      size_t n = table.columns.size();
      std::vector<size_t> width(n, 0);
      std::vector<bool> numeric(n, true);
      std::vector<std::vector<std::string>> cells;
      for (size_t c = 0; c < n; ++c) width[c] = DisplayWidth(Printable(table.columns[c]));
      for (const auto& row : table.rows) {
        std::vector<std::string> line;
        for (size_t c = 0; c < n; ++c) {
          if (std::holds_alternative<std::string>(row[c])) numeric[c] = false;
          const Cell& cell = row[c];
          bool plain_int = std::holds_alternative<int64_t>(cell) && IsIdentifierColumn(table.columns[c]);
          line.push_back(Printable(CellToText(cell, !plain_int)));
          width[c] = std::max(width[c], DisplayWidth(line.back()));
        }
        cells.push_back(std::move(line));
      }
      auto pad = [](const std::string& s, size_t w, bool right) {
        size_t dw = DisplayWidth(s);
        std::string fill(w > dw ? w - dw : 0, ' ');
        return right ? fill + s : s + fill;
      };
      for (size_t c = 0; c < n; ++c) {
        out += (c ? " | " : "") + pad(Printable(table.columns[c]), width[c], false);
      }
      while (!out.empty() && out.back() == ' ') out.pop_back();
      out += "\n";
      for (size_t c = 0; c < n; ++c) {
        out += (c ? "-|-" : "") + std::string(width[c], '-');
      }
      out += "\n";
      for (const auto& line : cells) {
        std::string text;
        for (size_t c = 0; c < n; ++c) text += (c ? " | " : "") + pad(line[c], width[c], numeric[c]);
        while (!text.empty() && text.back() == ' ') text.pop_back();
        out += text + "\n";
      }
      return out;
    }
  }
  return out;
}

}  // namespace gw
