// A small blocking HTTP/1.1 client for ClickHouse's HTTP interface: one request per connection
// (Connection: close), deadlines on connect, send and receive, Content-Length and chunked
// responses, gzip request bodies. No TLS: for a server across an untrusted network put a TLS
// proxy on the node (docs/clickhouse.md).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace gw {

struct HttpEndpoint {
  std::string host;  // name or address
  int port = 0;
};

struct HttpClientRequest {
  std::string method = "POST";
  std::string target = "/";  // path and query, already percent-encoded
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool gzip_body = false;  // compress the body and say so (Content-Encoding: gzip)
  int64_t timeout_ms = 30000;
  int64_t max_response_bytes = int64_t{256} << 20;
};

struct HttpClientResponse {
  int status = 0;
  std::string body;
};

// kUnavailable when the server could not be reached or the connection broke before a whole
// response came back. `sent` (optional) says whether the whole request had been written:
// a request that was sent may have taken effect even though no answer came.
StatusOr<HttpClientResponse> HttpSend(const HttpEndpoint& to, const HttpClientRequest& request,
                                bool* sent = nullptr);

// gzip (RFC 1952) of `data` at zlib level 1.
StatusOr<std::string> GzipCompress(const std::string& data);

// Percent-encodes a query-string value.
std::string UrlEncode(const std::string& s);

}  // namespace gw
