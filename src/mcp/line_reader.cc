#include "mcp/line_reader.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gw::mcp {

namespace {

constexpr size_t kChunk = 64 * 1024;

bool IsBlank(const std::string& s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\r') return false;
  }
  return true;
}

}  // namespace

bool LineReader::Fill() {
  if (eof_) return false;
  char chunk[kChunk];
  while (true) {
    if (stop_fd_ >= 0) {
      pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      int r = ::poll(fds, 2, -1);
      if (r < 0 && errno == EINTR) continue;
      if (r > 0 && (fds[1].revents & POLLIN) != 0) {
        eof_ = true;  // the caller asked to stop
        return false;
      }
    }
    ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
      return true;
    }
    if (n == 0) {
      eof_ = true;
      return false;
    }
    if (errno == EINTR) continue;
    error_ = std::string("read stdin: ") + std::strerror(errno);
    eof_ = true;
    return false;
  }
}

LineItem LineReader::Next() {
  while (true) {
    size_t nl = buffer_.find('\n', scanned_);
    if (nl != std::string::npos) {
      if (discarding_) {
        LineItem item{LineKind::kTooLong, "", discarded_ + nl};
        buffer_.erase(0, nl + 1);
        scanned_ = 0;
        discarding_ = false;
        discarded_ = 0;
        return item;
      }
      if (nl > max_line_bytes_) {
        LineItem item{LineKind::kTooLong, "", nl};
        buffer_.erase(0, nl + 1);
        scanned_ = 0;
        return item;
      }
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      scanned_ = 0;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (IsBlank(line)) continue;
      return LineItem{LineKind::kLine, std::move(line), 0};
    }
    scanned_ = buffer_.size();
    if (!discarding_ && buffer_.size() > max_line_bytes_) {
      // Over the cap with no newline yet: stop keeping it.
      discarding_ = true;
      discarded_ = buffer_.size();
      buffer_.clear();
      scanned_ = 0;
    } else if (discarding_) {
      discarded_ += buffer_.size();
      buffer_.clear();
      scanned_ = 0;
    }
    if (!Fill()) {
      if (!error_.empty()) {
        LineItem item{LineKind::kError, error_, 0};
        error_.clear();
        return item;
      }
      if (discarding_) {
        LineItem item{LineKind::kTooLong, "", discarded_};
        discarding_ = false;
        discarded_ = 0;
        return item;
      }
      if (!buffer_.empty()) {
        // Last message without a trailing newline.
        std::string line = std::move(buffer_);
        buffer_.clear();
        scanned_ = 0;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!IsBlank(line)) return LineItem{LineKind::kLine, std::move(line), 0};
      }
      return LineItem{LineKind::kEof, "", 0};
    }
  }
}

}  // namespace gw::mcp
