// Reading typed columns off a SQLite row, shared by the store's typed readers (window_rows,
// export_rows). Internal to src/store.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "base/text.h"
#include "store/event.h"
#include "store/event_columns.h"

namespace gw {

// The column's integer, kNull when it is NULL.
inline int64_t ColInt(sqlite3_stmt* s, int i) {
  return sqlite3_column_type(s, i) == SQLITE_NULL ? kNull : sqlite3_column_int64(s, i);
}

// The column's text, "" when it is NULL.
inline std::string ColText(sqlite3_stmt* s, int i) {
  const unsigned char* t = sqlite3_column_text(s, i);
  return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
}

// Reads GW_EVENT_COLUMNS from columns first, first + 1, … of `s` into `e` (kNull = NULL; the op
// id as stored: a reader checks it with OpFromId).
inline void ReadEventColumns(sqlite3_stmt* s, int first, Event* e) {
  ForEachEventColumn(*e, [&](int i, auto& field) {
    field = static_cast<std::decay_t<decltype(field)>>(ColInt(s, first + i));
  });
}

// Text a traced process chose (its name and command line, its scripts' paths and function
// names, kernel and GPU names): one printable line (TerminalSafe). Reports are built from these
// rows, so a name cannot print a line break that forges a report line, nor an escape.
inline std::string ColLine(sqlite3_stmt* s, int i) { return TerminalSafe(ColText(s, i)); }

// The launch ops (`IsLaunch`) as an SQL list: counted in op_seconds, sampled as rows, never
// loaded in bulk.
inline constexpr const char* kLaunchOpList = "1,2,100,101";
// The ops of kernels run (`IsKernelRun`): launches plus graph_kernels.
inline constexpr const char* kKernelRunOpList = "1,2,27,100,101";

}  // namespace gw
