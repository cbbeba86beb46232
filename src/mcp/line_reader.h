// Reads newline-delimited messages from a file descriptor with a hard cap on message size.
//
// A line longer than the cap is never buffered whole: the reader keeps at most the cap plus
// one read chunk, then discards bytes up to the next newline and reports the line as too long,
// so one oversized (or endless) message costs bounded memory and the next line is read normally.
#pragma once

#include <cstddef>
#include <string>

namespace gw::mcp {

enum class LineKind {
  kLine,     // `text` holds one message (trailing "\r" removed)
  kTooLong,  // a line over the cap was discarded; `discarded_bytes` says how long it was
  kEof,      // input closed
  kError,    // read() failed; `text` says why
};

struct LineItem {
  LineKind kind = LineKind::kEof;
  std::string text;
  size_t discarded_bytes = 0;
};

class LineReader {
 public:
  // `stop_fd` (optional): once it is readable (an eventfd another thread writes), input counts
  // as ended, so a blocked Next() returns kEof.
  LineReader(int fd, size_t max_line_bytes, int stop_fd = -1)
      : fd_(fd), max_line_bytes_(max_line_bytes), stop_fd_(stop_fd) {}

  // Blocks until a line (skipping blank lines), an oversized line, EOF or an error.
  LineItem Next();

 private:
  bool Fill();  // one read() into buffer_; false at EOF or error (error_ set)

  int fd_;
  size_t max_line_bytes_;
  int stop_fd_;
  std::string buffer_;
  size_t scanned_ = 0;  // bytes of buffer_ already searched for '\n'
  bool discarding_ = false;
  size_t discarded_ = 0;
  bool eof_ = false;
  std::string error_;
};

}  // namespace gw::mcp
