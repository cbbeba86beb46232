// Result tables as users read them: aligned text (the brief's style), CSV and JSON.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace gw {

// One SQL-like cell: NULL, integer, real or text.
using Cell = std::variant<std::monostate, int64_t, double, std::string>;

struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
  bool truncated = false;  // rows were cut at a limit
  int64_t limit = 0;       // the limit that cut them
};

enum class TableFormat { kText, kCsv, kJson };

// Text: integers with thousands separators (not in id, pid, session or time columns), reals
// rounded for reading (never scientific notation), numbers right-aligned,
// a header row and a rule like the brief's. CSV: RFC 4180 quoting, raw numbers. JSON: an array
// of objects (plus a note on truncation written to stderr by the caller).
std::string FormatTable(const Table& table, TableFormat format);

std::string CellToText(const Cell& cell, bool human);
std::string WithThousands(int64_t v);
// The body of a JSON string (no quotes); invalid UTF-8 becomes U+FFFD, so the result is valid.
std::string JsonEscape(const std::string& s);
// One CSV field, quoted where needed; controls other than line breaks become '?'.
std::string CsvField(const std::string& s);

}  // namespace gw
