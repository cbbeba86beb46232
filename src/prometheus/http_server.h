// A small HTTP/1.1 server for one job: answering scrapes of /metrics. It runs inside a tracer
// that runs as root on shared hosts, so every request is treated as hostile: one thread, a
// poll loop over non-blocking sockets, at most `max_connections` open at once, a request head
// of at most `max_request_bytes`, one request per connection (`Connection: close`), a deadline
// for the request head and one for each connection's whole life (a slow or silent client is
// dropped). Slots are shared fairly: when all are taken, a new client takes the slot of the
// client that has waited longest without sending a whole request, so idle connections
// (slow-loris) cannot keep a scrape waiting; a request being answered keeps its slot. Only GET
// and HEAD are answered; the handler decides the rest. It binds exactly the address it is
// given.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "base/scoped.h"
#include "base/status.h"

namespace gw {

// ADDR:PORT: a numeric IPv4 address (127.0.0.1:9464, 0.0.0.0:9464; localhost means 127.0.0.1)
// or a bracketed IPv6 one ([::1]:9464); port 0 picks a free port.
struct ListenAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
  std::string host;  // as given, without brackets
  int port = 0;
  std::string ToString() const;  // "127.0.0.1:9464", "[::1]:9464"
};
StatusOr<ListenAddress> ParseListenAddress(std::string_view text);

struct HttpRequest {
  std::string method;  // "GET"
  std::string path;    // the target without its query string: "/metrics"
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

enum class HeadParse { kIncomplete, kComplete, kBad, kTooLarge, kBadVersion };
// Parses a request head (request line and header lines up to the empty line) from `buffer`.
HeadParse ParseRequestHead(std::string_view buffer, size_t max_bytes, HttpRequest* out);
// The full response: status line, Content-Type, Content-Length, Connection: close, body
// (left out for HEAD).
std::string SerializeResponse(const HttpResponse& response, bool head);

struct HttpServerOptions {
  int max_connections = 8;
  size_t max_request_bytes = 8192;
  int64_t request_timeout_ms = 2000;     // accept → whole request head read
  int64_t connection_timeout_ms = 5000;  // accept → response written
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  // Binds and listens (errors name the address: in use, permission).
  static StatusOr<std::unique_ptr<HttpServer>> Create(const ListenAddress& address,
                                                      HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void Start(Handler handler);  // the serving thread
  void Stop();                  // joins it; idempotent
  int port() const { return port_; }
  // Connections accepted and not yet closed.
  int open_connections() const { return open_.load(); }
  int64_t responses() const { return responses_.load(); }
  // Connections closed before a whole request so that a newer client could have their slot.
  int64_t dropped_for_others() const { return dropped_for_others_.load(); }

 private:
  HttpServer(ScopedFd listen_fd, ScopedFd wake_read, ScopedFd wake_write, int port,
             HttpServerOptions options);
  void Run();

  ScopedFd listen_fd_;
  ScopedFd wake_read_, wake_write_;  // a pipe: Stop() wakes the poll
  int port_ = 0;
  HttpServerOptions options_;
  Handler handler_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> open_{0};
  std::atomic<int64_t> responses_{0};
  std::atomic<int64_t> dropped_for_others_{0};
};

}  // namespace gw
