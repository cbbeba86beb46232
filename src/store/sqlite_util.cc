#include "store/sqlite_util.h"

namespace gw {

Status SqliteStatus(sqlite3* db, int rc, const std::string& what) {
  std::string msg = what + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_DONE:
    case SQLITE_ROW:
      return Status::Ok();
    case SQLITE_CANTOPEN:
      return NotFound(msg);
    case SQLITE_PERM:
    case SQLITE_AUTH:
    case SQLITE_READONLY:
      return PermissionDenied(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return DataLoss(msg);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Unavailable(msg);
    case SQLITE_ERROR:
    case SQLITE_RANGE:
    case SQLITE_MISMATCH:
      return InvalidArgument(msg);
    case SQLITE_INTERRUPT:
      return Unavailable(msg);
    default:
      return Internal(msg);
  }
}

Status Exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return SqliteStatus(nullptr, rc, msg).WithContext("sql");
  }
  return Status::Ok();
}

StatusOr<ScopedStmt> Prepare(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteStatus(db, rc, "prepare");
  return ScopedStmt(stmt);
}

StatusOr<int64_t> QueryInt(sqlite3* db, const std::string& sql, int64_t if_empty) {
  ASSIGN_OR_RETURN(ScopedStmt stmt, Prepare(db, sql));
  int rc = sqlite3_step(stmt.get());
  if (rc == SQLITE_ROW) {
    if (sqlite3_column_type(stmt.get(), 0) == SQLITE_NULL) return if_empty;
    return static_cast<int64_t>(sqlite3_column_int64(stmt.get(), 0));
  }
  if (rc == SQLITE_DONE) return if_empty;
  return SqliteStatus(db, rc, "query");
}

StatusOr<std::string> QueryText(sqlite3* db, const std::string& sql, const std::string& if_empty) {
  ASSIGN_OR_RETURN(ScopedStmt stmt, Prepare(db, sql));
  int rc = sqlite3_step(stmt.get());
  if (rc == SQLITE_ROW) {
    const unsigned char* t = sqlite3_column_text(stmt.get(), 0);
    return t ? std::string(reinterpret_cast<const char*>(t)) : if_empty;
  }
  if (rc == SQLITE_DONE) return if_empty;
  return SqliteStatus(db, rc, "query");
}

}  // namespace gw
