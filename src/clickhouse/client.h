// ClickHouse over its HTTP interface: the URL gpuwhy takes, statements, TSV queries and
// compressed inserts. Used by the sink (trace --sink) and the fleet readers (query/explain/fleet
// --clickhouse).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "clickhouse/http.h"

namespace gw {

// clickhouse://[USER[:PASSWORD]@]HOST[:PORT][/DATABASE]; PORT defaults to 8123 (the HTTP
// interface), DATABASE to "gpuwhy".
struct ClickHouseUrl {
  HttpEndpoint endpoint;
  std::string user;
  std::string password;
  std::string database = "gpuwhy";
  std::string Display() const;  // without the password
};
StatusOr<ClickHouseUrl> ParseClickHouseUrl(const std::string& text);

// One row of a TabSeparated result, fields unescaped; `null[i]` marks \N.
struct TsvRow {
  std::vector<std::string> fields;
  std::vector<bool> null;
};
// Splits a TabSeparated body into rows (ClickHouse's escapes undone).
std::vector<TsvRow> ParseTsv(const std::string& body);

// The longest answer a query may have (64 MiB): a page of events is about 20 MiB.
inline constexpr int64_t kMaxQueryResponseBytes = int64_t{64} << 20;

class ClickHouseClient {
 public:
  explicit ClickHouseClient(ClickHouseUrl url) : url_(std::move(url)) {}

  // A statement without a result (DDL). `database` "" = the server's default.
  Status Execute(const std::string& sql, int64_t timeout_ms = 30000) const;
  // A query's TabSeparated result (append FORMAT yourself for other formats).
  // `settings`: extra URL parameters ("readonly=1&max_result_rows=10"). A longer answer is an
  // error: the server (or whoever answers in its name over plain HTTP) must not be able to
  // make the reader allocate without bound; parsed rows take several times the text.
  StatusOr<std::string> Query(const std::string& sql, const std::string& database = "",
                              int64_t timeout_ms = 30000,
                              int64_t max_bytes = kMaxQueryResponseBytes,
                              const std::string& settings = "") const;
  // INSERT INTO table FORMAT TabSeparated with a gzip body. `sent` as in HttpSend.
  Status InsertTsv(const std::string& table, const std::string& tsv, bool* sent = nullptr,
                   int64_t timeout_ms = 30000) const;

  const ClickHouseUrl& url() const { return url_; }

 private:
  StatusOr<std::string> Send(const std::string& query_param, const std::string& body,
                             const std::string& database, bool gzip, int64_t timeout_ms,
                             int64_t max_bytes, bool* sent, const std::string& settings = "") const;
  ClickHouseUrl url_;
};

// 'text' as a ClickHouse string literal.
std::string ClickHouseQuote(const std::string& text);

}  // namespace gw
