#include "clickhouse/http.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <cctype>
#include <cstring>
#include <strings.h>

#include "base/scoped.h"

namespace gw {

namespace {

using Clock = std::chrono::steady_clock;

int RemainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(left.count());
}

Status WaitFor(int fd, short events, Clock::time_point deadline, const std::string& what) {
  for (;;) {
    int ms = RemainingMs(deadline);
    if (ms == 0) return Unavailable(what + ": timed out");
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, ms);
    if (rc > 0) return Status::Ok();
    if (rc == 0) return Unavailable(what + ": timed out");
    if (errno != EINTR) return ErrnoStatus(what, errno);
  }
}

StatusOr<ScopedFd> Connect(const HttpEndpoint& to, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string port = std::to_string(to.port);
  int rc = ::getaddrinfo(to.host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    return Unavailable("resolve " + to.host + ": " + gai_strerror(rc));
  }
  std::string last_error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    ScopedFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                         a->ai_protocol));
    if (!fd) continue;
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last_error = std::strerror(errno);
      continue;
    }
    Status ready = WaitFor(fd.get(), POLLOUT, deadline, "connect");
    int err = 0;
    socklen_t len = sizeof err;
    if (ready.ok() && ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
      ::freeaddrinfo(found);
      return fd;
    }
    last_error = ready.ok() ? std::strerror(err) : ready.message();
  }
  ::freeaddrinfo(found);
  return Unavailable("connect to " + to.host + ":" + port + ": " + last_error);
}

Status SendAll(int fd, const std::string& data, Clock::time_point deadline) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      RETURN_IF_ERROR(WaitFor(fd, POLLOUT, deadline, "send"));
      continue;
    }
    return Unavailable(std::string("send: ") + (n < 0 ? std::strerror(errno) : "closed"));
  }
  return Status::Ok();
}

// Reads until the peer closes (Connection: close), within the deadline and the size cap.
StatusOr<std::string> ReceiveAll(int fd, Clock::time_point deadline, int64_t max_bytes) {
  std::string data;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      data.append(buf, static_cast<size_t>(n));
      if (static_cast<int64_t>(data.size()) > max_bytes) {
        return FailedPrecondition("the response is larger than " +
                                 std::to_string(max_bytes >> 20) + " MiB");
      }
      continue;
    }
    if (n == 0) return data;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      RETURN_IF_ERROR(WaitFor(fd, POLLIN, deadline, "receive"));
      continue;
    }
    return Unavailable(std::string("receive: ") + std::strerror(errno));
  }
}

bool IEquals(const std::string& a, const char* b) { return strcasecmp(a.c_str(), b) == 0; }

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A chunked body, undone. The sizes are the server's to choose: each must be hex that fits,
// and lie inside what was received (a size near 2^64 once wrapped the arithmetic and grew the
// output without end).
StatusOr<std::string> Dechunk(const std::string& raw) {
  std::string out;
  size_t pos = 0;
  for (;;) {
    size_t eol = raw.find("\r\n", pos);
    if (eol == std::string::npos) return Unavailable("truncated chunked response");
    size_t size = 0;
    size_t digits = 0;
    for (size_t i = pos; i < eol && HexDigit(raw[i]) >= 0; ++i) {
      if (++digits > 15) return Unavailable("bad chunked response: a chunk size too large");
      size = size * 16 + static_cast<size_t>(HexDigit(raw[i]));
    }
    if (digits == 0) return Unavailable("bad chunked response: no chunk size");
    pos = eol + 2;
    if (size == 0) return out;
    if (size > raw.size() - pos) return Unavailable("truncated chunked response");
    out.append(raw, pos, size);
    pos += size;
    if (raw.size() - pos < 2) return Unavailable("truncated chunked response");
    pos += 2;
  }
}

}  // namespace

StatusOr<std::string> GzipCompress(const std::string& data) {
  z_stream z{};
  // 15 window bits + 16: a gzip header and trailer instead of zlib's.
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return Internal("deflateInit2 failed");
  }
  std::string out;
  out.resize(deflateBound(&z, data.size()) + 32);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return Internal("gzip: deflate failed");
  return out;
}

std::string UrlEncode(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

StatusOr<HttpClientResponse> HttpSend(const HttpEndpoint& to, const HttpClientRequest& request, bool* sent) {
  if (sent) *sent = false;
  Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(request.timeout_ms);
  std::string body = request.body;
  if (request.gzip_body) {
    ASSIGN_OR_RETURN(body, GzipCompress(request.body));
  }
  std::string head = request.method + " " + request.target + " HTTP/1.1\r\nHost: " + to.host +
                     ":" + std::to_string(to.port) +
                     "\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
                     "\r\n";
  if (request.gzip_body) head += "Content-Encoding: gzip\r\n";
  for (const auto& [name, value] : request.headers) head += name + ": " + value + "\r\n";
  head += "\r\n";
  ASSIGN_OR_RETURN(ScopedFd fd, Connect(to, deadline));
  RETURN_IF_ERROR(SendAll(fd.get(), head + body, deadline));
  if (sent) *sent = true;
  ASSIGN_OR_RETURN(std::string raw, ReceiveAll(fd.get(), deadline, request.max_response_bytes));
  size_t header_end = raw.find("\r\n\r\n");
  if (header_end == std::string::npos || raw.compare(0, 5, "HTTP/") != 0) {
    return Unavailable("no HTTP response from " + to.host + ":" + std::to_string(to.port));
  }
  HttpClientResponse response;
  size_t sp = raw.find(' ');
  response.status = std::atoi(raw.c_str() + sp + 1);
  bool chunked = false;
  int64_t length = -1;
  size_t pos = raw.find("\r\n") + 2;
  while (pos < header_end) {
    size_t eol = raw.find("\r\n", pos);
    std::string line = raw.substr(pos, eol - pos);
    pos = eol + 2;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    if (IEquals(name, "Transfer-Encoding") && value.find("chunked") != std::string::npos) {
      chunked = true;
    } else if (IEquals(name, "Content-Length")) {
      length = std::strtoll(value.c_str(), nullptr, 10);
    }
  }
  std::string payload = raw.substr(header_end + 4);
  if (chunked) {
    ASSIGN_OR_RETURN(response.body, Dechunk(payload));
  } else {
    if (length >= 0 && static_cast<int64_t>(payload.size()) < length) {
      return Unavailable("truncated response from " + to.host);
    }
    response.body = length >= 0 ? payload.substr(0, static_cast<size_t>(length)) : payload;
  }
  return response;
}

}  // namespace gw
