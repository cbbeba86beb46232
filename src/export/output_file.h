// The file an export writes: created beside its final name and renamed over it on Commit(), so a
// failed or interrupted export never leaves a truncated trace under the name the user asked for.
// "-" writes to standard output instead (no rename).
//
// As root under sudo every file operation (the temporary file, its mode, the rename, removing
// it) runs with the invoking user's filesystem identity, as the database's do
// (store/db_location.h): a directory on the path swapped for a link leads nowhere that user
// could not already write, and the file is theirs.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/scoped.h"
#include "base/status.h"

namespace gw {

class OutputFile {
 public:
  // Fails (naming the file and the reason, e.g. EACCES) when the directory is not writable.
  // `mode`: the permission bits to give the file (less the umask): pass the recording's, so an
  // export of a 0600 recording is 0600 too.
  static StatusOr<std::unique_ptr<OutputFile>> Create(const std::string& path,
                                                      mode_t mode = 0666);
  // The permission bits of the recording at `db_path` (0666 when it cannot be read).
  static mode_t ModeOf(const std::string& db_path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Buffered; an error is kept and returned by Commit().
  void Write(std::string_view bytes);
  // Flushes, closes and renames the file into place.
  Status Commit();

  int64_t bytes_written() const { return bytes_; }
  const std::string& path() const { return path_; }

 private:
  OutputFile(std::string path, std::string temp_path, ScopedFd fd)
      : path_(std::move(path)), temp_path_(std::move(temp_path)), fd_(std::move(fd)) {}
  bool as_user_ = false;  // file operations with the sudo user's identity
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  void Flush();

  std::string path_;
  std::string temp_path_;  // "" for standard output
  ScopedFd fd_;
  std::string buffer_;
  int64_t bytes_ = 0;
  int error_ = 0;  // errno of the first failed write
  bool committed_ = false;
};

}  // namespace gw
