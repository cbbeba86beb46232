#include "prometheus/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

namespace gw {

namespace {

// Clients taken from the backlog in one turn of the loop (the rest wait for the next turn).
constexpr size_t kMaxAcceptsPerPoll = 64;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

bool IsTokenChar(char c) { return c >= 'A' && c <= 'Z'; }

}  // namespace

std::string ListenAddress::ToString() const {
  bool v6 = addr.ss_family == AF_INET6;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

StatusOr<ListenAddress> ParseListenAddress(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("--prometheus " + std::string(text) + ": " + why +
                           " — hint: ADDR:PORT with a numeric address or localhost, e.g. "
                           "127.0.0.1:9464, localhost:9464, 0.0.0.0:9464 or [::1]:9464");
  };
  ListenAddress out;
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return bad("an IPv6 address is written [ADDR]:PORT");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return bad("an IPv6 address needs brackets");
    // The one name everyone types; no other name is resolved (it would depend on DNS).
    if (host == "localhost") host = "127.0.0.1";
  }
  if (host.empty()) return bad("no address (to listen on every interface say 0.0.0.0 or [::])");
  if (port.empty() || port.size() > 5) return bad("the port is a number from 0 to 65535");
  int p = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return bad("the port is a number from 0 to 65535");
    p = p * 10 + (c - '0');
  }
  if (p > 65535) return bad("the port is a number from 0 to 65535");
  out.host = std::string(host);
  out.port = p;
  if (text.front() == '[') {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&out.addr);
    if (inet_pton(AF_INET6, out.host.c_str(), &a6->sin6_addr) != 1) {
      return bad("not a numeric IPv6 address");
    }
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(static_cast<uint16_t>(p));
    out.len = sizeof(sockaddr_in6);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&out.addr);
    if (inet_pton(AF_INET, out.host.c_str(), &a4->sin_addr) != 1) {
      return bad("not a numeric IPv4 address (host names other than localhost are not resolved)");
    }
    a4->sin_family = AF_INET;
    a4->sin_port = htons(static_cast<uint16_t>(p));
    out.len = sizeof(sockaddr_in);
  }
  return out;
}

HeadParse ParseRequestHead(std::string_view buffer, size_t max_bytes, HttpRequest* out) {
  size_t end = buffer.find("\r\n\r\n");
  size_t alt = buffer.find("\n\n");
  if (end == std::string_view::npos || (alt != std::string_view::npos && alt < end)) end = alt;
  if (end == std::string_view::npos) {
    return buffer.size() > max_bytes ? HeadParse::kTooLarge : HeadParse::kIncomplete;
  }
  if (end > max_bytes) return HeadParse::kTooLarge;
  std::string_view line = buffer.substr(0, buffer.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0 || sp1 > 16) return HeadParse::kBad;
  size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return HeadParse::kBad;
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  for (char c : method) {
    if (!IsTokenChar(c)) return HeadParse::kBad;
  }
  if (target.front() != '/') return HeadParse::kBad;
  for (char c : target) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return HeadParse::kBad;
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return version.substr(0, 5) == "HTTP/" ? HeadParse::kBadVersion : HeadParse::kBad;
  }
  out->method = std::string(method);
  out->path = std::string(target.substr(0, target.find_first_of("?#")));
  return HeadParse::kComplete;
}

std::string SerializeResponse(const HttpResponse& r, bool head) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + Reason(r.status) +
                    "\r\nContent-Type: " + r.content_type +
                    "\r\nContent-Length: " + std::to_string(r.body.size()) +
                    "\r\nConnection: close\r\n";
  if (r.status == 405) out += "Allow: GET, HEAD\r\n";
  out += "\r\n";
  if (!head) out += r.body;
  return out;
}

HttpServer::HttpServer(ScopedFd listen_fd, ScopedFd wake_read, ScopedFd wake_write, int port,
                       HttpServerOptions options)
    : listen_fd_(std::move(listen_fd)),
      wake_read_(std::move(wake_read)),
      wake_write_(std::move(wake_write)),
      port_(port),
      options_(options) {}

HttpServer::~HttpServer() { Stop(); }

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Create(const ListenAddress& address,
                                                         HttpServerOptions options) {
  std::string where = "listen on " + address.ToString();
  ScopedFd fd(socket(address.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoStatus(where + ": socket", errno);
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  // [::] means IPv6 only: bind exactly what was asked for.
  if (address.addr.ss_family == AF_INET6) {
    setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  }
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&address.addr), address.len) != 0) {
    int err = errno;
    Status st = ErrnoStatus(where, err);
    if (err == EADDRINUSE) {
      return Status(st.code(), st.message() +
                                   " — hint: another program serves that port; "
                                   "pick another one");
    }
    if (err == EADDRNOTAVAIL) {
      return Status(st.code(), st.message() +
                                   " — hint: no interface of this host has that "
                                   "address");
    }
    return st;
  }
  // The kernel's whole backlog (SOMAXCONN, capped by net.core.somaxconn): connections wait
  // there until the loop takes them, idle ones included; a backlog that fills drops the SYNs of
  // the next clients, and a scraper whose SYN is dropped retries only after a second.
  if (listen(fd.get(), SOMAXCONN) != 0) return ErrnoStatus(where, errno);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  int port = address.port;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
    port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC) != 0) return ErrnoStatus(where + ": pipe", errno);
  return std::unique_ptr<HttpServer>(
      new HttpServer(std::move(fd), ScopedFd(pipe_fds[0]), ScopedFd(pipe_fds[1]), port, options));
}

void HttpServer::Start(Handler handler) {
  handler_ = std::move(handler);
  thread_ = std::thread([this] { Run(); });
}

void HttpServer::Stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  char b = 1;
  (void)!write(wake_write_.get(), &b, 1);
  thread_.join();
}

void HttpServer::Run() {
  pthread_setname_np(pthread_self(), "gw-prom-http");  // its CPU shows per thread in top -H
  enum class State { kReading, kWriting, kDraining };
  struct Connection {
    ScopedFd fd;
    State state = State::kReading;
    std::string in;
    std::string out;
    size_t sent = 0;
    int64_t accepted_ms = 0;
    int64_t deadline_ms = 0;
  };
  std::vector<Connection> conns;
  std::vector<pollfd> fds;
  char buf[4096];
  auto respond = [&](Connection& c, const HttpResponse& r, bool head, int64_t now) {
    c.out = SerializeResponse(r, head);
    c.sent = 0;
    c.state = State::kWriting;
    c.deadline_ms = std::max(now, c.accepted_ms + options_.connection_timeout_ms);
  };
  // Moves one connection on by what `rev` says is possible; false when it is to be closed.
  auto serve = [&](Connection& c, short rev, int64_t now) -> bool {
    if (now >= c.deadline_ms) return false;
    if (c.state == State::kReading && (rev & (POLLIN | POLLHUP | POLLERR))) {
      size_t room =
          options_.max_request_bytes + 1 - std::min(c.in.size(), options_.max_request_bytes);
      ssize_t got = recv(c.fd.get(), buf, std::min(room, sizeof buf), 0);
      if (got > 0) {
        c.in.append(buf, static_cast<size_t>(got));
        HttpRequest req;
        switch (ParseRequestHead(c.in, options_.max_request_bytes, &req)) {
          case HeadParse::kIncomplete:
            break;
          case HeadParse::kComplete: {
            HttpResponse r = handler_ ? handler_(req) : HttpResponse{404, "text/plain", ""};
            respond(c, r, req.method == "HEAD", now);
            break;
          }
          case HeadParse::kBad:
            respond(c, {400, "text/plain; charset=utf-8", "bad request\n"}, false, now);
            break;
          case HeadParse::kTooLarge:
            respond(c, {431, "text/plain; charset=utf-8", "request head too large\n"}, false, now);
            break;
          case HeadParse::kBadVersion:
            respond(c, {505, "text/plain; charset=utf-8", "HTTP/1.x only\n"}, false, now);
            break;
        }
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        return false;  // the client went away before a whole request
      }
    }
    if (c.state == State::kWriting && (rev & (POLLOUT | POLLHUP | POLLERR))) {
      ssize_t put = send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (put > 0) {
        c.sent += static_cast<size_t>(put);
        if (c.sent == c.out.size()) {
          responses_++;
          // Lingering close: the client reads to EOF; unread input on a plain close would
          // reset the connection and could cut the response short.
          shutdown(c.fd.get(), SHUT_WR);
          c.state = State::kDraining;
          c.out.clear();
          c.out.shrink_to_fit();
          c.deadline_ms = std::min(c.deadline_ms, now + 1000);
        }
      } else if (put < 0 && errno != EAGAIN && errno != EINTR) {
        return false;
      }
    } else if (c.state == State::kDraining && (rev & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t got = recv(c.fd.get(), buf, sizeof buf, 0);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return false;
    }
    return true;
  };
  // The slot a new client may take when all are in use: a finished response lingering for the
  // client's EOF first, else the connection that has waited longest without sending a whole
  // request. A connection being answered is never taken. Null when none may be taken.
  auto slot_to_take = [&]() -> Connection* {
    Connection* oldest = nullptr;
    for (Connection& c : conns) {
      if (c.state == State::kDraining) return &c;
      if (c.state == State::kReading && (oldest == nullptr || c.accepted_ms < oldest->accepted_ms)) {
        oldest = &c;
      }
    }
    return oldest;
  };
  const size_t max_conns = static_cast<size_t>(std::max(1, options_.max_connections));
  while (!stop_.load()) {
    int64_t now = NowMs();
    fds.clear();
    fds.push_back({wake_read_.get(), POLLIN, 0});
    // A full house still accepts while some connection holds a slot without being answered:
    // idle or slow clients (slow-loris) cannot keep a scrape waiting in the backlog.
    bool full = conns.size() >= max_conns;
    bool accepting = !full || slot_to_take() != nullptr;
    fds.push_back({accepting ? listen_fd_.get() : -1, POLLIN, 0});
    int timeout = 1000;
    for (Connection& c : conns) {
      fds.push_back(
          {c.fd.get(), static_cast<short>(c.state == State::kWriting ? POLLOUT : POLLIN), 0});
      timeout =
          static_cast<int>(std::min<int64_t>(timeout, std::max<int64_t>(0, c.deadline_ms - now)));
    }
    int n = poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR) break;
    now = NowMs();
    if (fds[0].revents != 0) {
      while (read(wake_read_.get(), buf, sizeof buf) > 0) {
      }
    }
    for (size_t i = 0; i < conns.size(); ++i) {
      if (!serve(conns[i], fds[i + 2].revents, now)) conns[i].fd.Reset();
    }
    size_t before = conns.size();
    std::erase_if(conns, [](const Connection& c) { return !c.fd; });
    open_ -= static_cast<int>(before - conns.size());
    if (accepting && (fds[1].revents & POLLIN)) {
      // Each client waiting in the backlog gets a slot, and its request is read at once (a
      // scraper sends it with the connection): it is answered before any later client could
      // take its slot.
      for (size_t accepted = 0; accepted < kMaxAcceptsPerPoll; ++accepted) {
        Connection* taken = nullptr;
        if (conns.size() >= max_conns && (taken = slot_to_take()) == nullptr) break;
        int fd = accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        if (taken != nullptr) {
          taken->fd.Reset();
          std::erase_if(conns, [](const Connection& c) { return !c.fd; });
          open_--;
          dropped_for_others_++;
        }
        Connection c;
        c.fd = ScopedFd(fd);
        c.accepted_ms = now;
        c.deadline_ms =
            now + std::min(options_.request_timeout_ms, options_.connection_timeout_ms);
        open_++;
        if (serve(c, POLLIN, now)) {
          conns.push_back(std::move(c));
        } else {
          open_--;
        }
      }
    }
  }
  open_ = 0;
}

}  // namespace gw
