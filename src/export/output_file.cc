#include "export/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "store/db_location.h"

namespace gw {

namespace {
constexpr size_t kBufferBytes = 1 << 20;
}

mode_t OutputFile::ModeOf(const std::string& db_path) {
  struct stat st {};
  return stat(db_path.c_str(), &st) == 0 ? (st.st_mode & 0666) : 0666;
}

StatusOr<std::unique_ptr<OutputFile>> OutputFile::Create(const std::string& path, mode_t mode) {
  if (path.empty()) return InvalidArgument("-o needs a file name");
  if (path == "-") {
    int fd = dup(STDOUT_FILENO);
    if (fd < 0) return ErrnoStatus("write to standard output", errno);
    return std::unique_ptr<OutputFile>(new OutputFile(path, "", ScopedFd(fd)));
  }
  DatabaseOwner user = InvokingDatabaseOwner();
  bool as_user = geteuid() == 0 && user.uid != 0;
  ScopedFsIdentity identity(as_user, user.uid, user.gid);
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return InvalidArgument("-o " + path + " is a directory — hint: give a file name");
  }
  std::string temp = path + ".tmp-XXXXXX";
  int fd = mkstemp(temp.data());
  if (fd < 0) {
    return ErrnoStatus(
        "create " + path + (as_user ? " (written as " + user.name + ", who ran sudo)" : ""),
        errno);
  }
  // mkstemp makes the file 0600; give it the mode asked for, less the umask.
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, mode & 0666 & ~mask);
  std::unique_ptr<OutputFile> file(new OutputFile(path, temp, ScopedFd(fd)));
  file->as_user_ = as_user;
  file->uid_ = user.uid;
  file->gid_ = user.gid;
  return file;
}

OutputFile::~OutputFile() {
  if (!committed_ && !temp_path_.empty()) {
    ScopedFsIdentity identity(as_user_, uid_, gid_);
    unlink(temp_path_.c_str());
  }
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
  ScopedFsIdentity identity(as_user_, uid_, gid_);
  if (rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return ErrnoStatus("rename " + temp_path_ + " to " + path_, errno);
  }
  committed_ = true;
  return Status::Ok();
}

}  // namespace gw
