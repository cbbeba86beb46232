#include "clickhouse/client.h"

#include <cctype>
#include <cstdlib>

#include "base/text.h"
#include "store/db_location.h"

namespace gw {

std::string ClickHouseUrl::Display() const {
  std::string out = "clickhouse://";
  if (!user.empty()) out += user + "@";
  return out + endpoint.host + ":" + std::to_string(endpoint.port) + "/" + database;
}

namespace {

// The password a URL leaves out: $GPUWHY_CLICKHOUSE_PASSWORD, else the first line of the file
// $GPUWHY_CLICKHOUSE_PASSWORD_FILE names, else none. Either keeps it out of argv, where every
// user of the host can read it (ps, /proc/PID/cmdline). Under sudo the file is read as the
// invoking user: root must not send a file that user cannot read to a server the user chose.
StatusOr<std::string> PasswordFromEnvironment() {
  if (const char* pw = std::getenv("GPUWHY_CLICKHOUSE_PASSWORD"); pw != nullptr && *pw != '\0') {
    return std::string(pw);
  }
  const char* file = std::getenv("GPUWHY_CLICKHOUSE_PASSWORD_FILE");
  if (file == nullptr || *file == '\0') return std::string();
  const std::string what = "GPUWHY_CLICKHOUSE_PASSWORD_FILE '" + TerminalSafe(file) + "'";
  ASSIGN_OR_RETURN(std::string pw, ReadFileAsInvokingUser(file, 4096, what));
  pw = pw.substr(0, pw.find_first_of("\r\n"));
  if (pw.empty()) return InvalidArgument(what + " holds no password on its first line");
  return pw;
}

}  // namespace

StatusOr<ClickHouseUrl> ParseClickHouseUrl(const std::string& text) {
  const std::string scheme = "clickhouse://";
  auto bad = [&](const std::string& why) {
    return InvalidArgument("bad ClickHouse URL '" + TerminalSafe(RedactUrlPasswords(text)) +
                           "': " + why +
                           " — expected clickhouse://[USER[:PASSWORD]@]HOST[:PORT][/DATABASE]");
  };
  if (text.compare(0, scheme.size(), scheme) != 0) return bad("it must start with clickhouse://");
  std::string rest = text.substr(scheme.size());
  ClickHouseUrl url;
  // The credentials end at the last '@' (a database name holds none): a password may hold any
  // character, '/' and '@' included.
  if (size_t at = rest.rfind('@'); at != std::string::npos) {
    std::string credentials = rest.substr(0, at);
    rest = rest.substr(at + 1);
    size_t colon = credentials.find(':');
    url.user = credentials.substr(0, colon);
    if (colon != std::string::npos) url.password = credentials.substr(colon + 1);
  }
  if (size_t slash = rest.find('/'); slash != std::string::npos) {
    url.database = rest.substr(slash + 1);
    rest.resize(slash);
    if (url.database.empty()) url.database = "gpuwhy";
  }
  for (char c : url.database) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') {
      return bad("the database name may hold only letters, digits and _");
    }
  }
  if (std::isdigit(static_cast<unsigned char>(url.database[0]))) {
    return bad("the database name must not start with a digit");
  }
  url.endpoint.port = 8123;
  if (size_t colon = rest.rfind(':'); colon != std::string::npos && rest.back() != ']') {
    std::string port = rest.substr(colon + 1);
    rest.resize(colon);
    char* end = nullptr;
    long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 1 || p > 65535) return bad("the port is not 1-65535");
    url.endpoint.port = static_cast<int>(p);
  }
  if (rest.size() > 2 && rest.front() == '[' && rest.back() == ']') rest = rest.substr(1, rest.size() - 2);
  if (rest.empty()) return bad("no host");
  for (char c : rest) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '/' || c == '?' || c == '#') {
      return bad("the host holds a character a host name cannot");
    }
  }
  url.endpoint.host = rest;
  if (url.password.empty()) {
    ASSIGN_OR_RETURN(url.password, PasswordFromEnvironment());
  }
  return url;
}

std::vector<TsvRow> ParseTsv(const std::string& body) {
  std::vector<TsvRow> rows;
  TsvRow row;
  std::string field;
  bool escaped_null = false;
  auto end_field = [&] {
    row.null.push_back(escaped_null);
    row.fields.push_back(std::move(field));
    field.clear();
    escaped_null = false;
  };
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c == '\t') {
      end_field();
    } else if (c == '\n') {
      end_field();
      rows.push_back(std::move(row));
      row = {};
    } else if (c == '\\' && i + 1 < body.size()) {
      char n = body[++i];
      switch (n) {
        case 't': field += '\t'; break;
        case 'n': field += '\n'; break;
        case 'r': field += '\r'; break;
        case '0': field += '\0'; break;
        case 'b': field += '\b'; break;
        case 'f': field += '\f'; break;
        case 'N': escaped_null = field.empty(); break;
        default: field += n;  // \\ \' and any other escaped character
      }
    } else {
      field += c;
    }
  }
  if (!field.empty() || !row.fields.empty()) {
    end_field();
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string ClickHouseQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

StatusOr<std::string> ClickHouseClient::Send(const std::string& query_param,
                                             const std::string& body, const std::string& database,
                                             bool gzip, int64_t timeout_ms, int64_t max_bytes,
                                             bool* sent, const std::string& settings) const {
  HttpClientRequest request;
  request.target = "/?";
  if (!query_param.empty()) request.target += "query=" + UrlEncode(query_param) + "&";
  if (!database.empty()) request.target += "database=" + UrlEncode(database) + "&";
  if (!settings.empty()) request.target += settings + "&";
  // The server stops a statement at our deadline too, so a slow query does not run on there.
  request.target += "max_execution_time=" + std::to_string(std::max<int64_t>(1, timeout_ms / 1000));
  request.body = body;
  request.gzip_body = gzip;
  request.timeout_ms = timeout_ms;
  request.max_response_bytes = max_bytes;
  if (!url_.user.empty()) request.headers.emplace_back("X-ClickHouse-User", url_.user);
  if (!url_.password.empty()) request.headers.emplace_back("X-ClickHouse-Key", url_.password);
  StatusOr<HttpClientResponse> response = HttpSend(url_.endpoint, request, sent);
  if (!response.ok()) {
    return Status(response.status().code(),
                  "ClickHouse at " + url_.Display() + ": " + response.status().message());
  }
  if (response->status != 200) {
    std::string message = response->body;
    while (!message.empty() && std::isspace(static_cast<unsigned char>(message.back()))) {
      message.pop_back();
    }
    if (message.size() > 600) message = message.substr(0, 600) + "…";
    message = TerminalSafe(message);  // the server's text: no escapes reach the terminal
    // 5xx from a server that is starting or overloaded is transient; a bad statement is not.
    bool syntax = message.find("Code: 62") != std::string::npos ||
                  message.find("Code: 47") != std::string::npos ||
                  message.find("Code: 60") != std::string::npos;
    std::string text = "ClickHouse at " + url_.Display() + " answered " +
                       std::to_string(response->status) + ": " + message;
    return syntax ? InvalidArgument(text) : Unavailable(text);
  }
  return std::move(response->body);
}

Status ClickHouseClient::Execute(const std::string& sql, int64_t timeout_ms) const {
  return Send("", sql, "", false, timeout_ms, 1 << 20, nullptr).status();
}

StatusOr<std::string> ClickHouseClient::Query(const std::string& sql, const std::string& database,
                                              int64_t timeout_ms, int64_t max_bytes,
                                              const std::string& settings) const {
  return Send("", sql, database, false, timeout_ms, max_bytes, nullptr, settings);
}

Status ClickHouseClient::InsertTsv(const std::string& table, const std::string& tsv, bool* sent,
                                   int64_t timeout_ms) const {
  return Send("INSERT INTO " + url_.database + "." + table + " FORMAT TabSeparated", tsv, "",
              true, timeout_ms, 1 << 20, sent)
      .status();
}

}  // namespace gw
