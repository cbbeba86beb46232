#include "export/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace gw {

namespace {
constexpr size_t kBufferBytes = 1 << 20;
}

StatusOr<std::unique_ptr<OutputFile>> OutputFile::Create(const std::string& path) {
  if (path.empty()) return InvalidArgument("-o needs a file name");
  if (path == "-") {
    int fd = dup(STDOUT_FILENO);
    if (fd < 0) return ErrnoStatus("write to standard output", errno);
    return std::unique_ptr<OutputFile>(new OutputFile(path, "", ScopedFd(fd)));
  }
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return InvalidArgument("-o " + path + " is a directory — hint: give a file name");
  }
  std::string temp = path + ".tmp-XXXXXX";
  int fd = mkstemp(temp.data());
  if (fd < 0) {
    return ErrnoStatus("create " + path, errno);
  }
  // mkstemp makes the file 0600; give it the mode a plain create would (0666 less the umask).
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  return std::unique_ptr<OutputFile>(new OutputFile(path, temp, ScopedFd(fd)));
}

OutputFile::~OutputFile() {
  if (!committed_ && !temp_path_.empty()) unlink(temp_path_.c_str());
}

void OutputFile::Write(std::string_view bytes) {
  buffer_.append(bytes.data(), bytes.size());
  bytes_ += static_cast<int64_t>(bytes.size());
  if (buffer_.size() >= kBufferBytes) Flush();
}

void OutputFile::Flush() {
  size_t done = 0;
  while (error_ == 0 && done < buffer_.size()) {
    ssize_t n = write(fd_.get(), buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error_ = errno;
      break;
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
}

Status OutputFile::Commit() {
  Flush();
  if (error_ != 0) return ErrnoStatus("write " + path_, error_);
  if (temp_path_.empty()) {
    fd_.Reset();
    committed_ = true;
    return Status::Ok();
  }
  int fd = static_cast<int>(fd_.Release());
  if (close(fd) != 0) return ErrnoStatus("write " + path_, errno);
  if (rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return ErrnoStatus("rename " + temp_path_ + " to " + path_, errno);
  }
  committed_ = true;
  return Status::Ok();
}

}  // namespace gw
