#include "demo/blkio_throttle.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <utility>

namespace gw {
namespace {

constexpr char kBlkioRoot[] = "/sys/fs/cgroup/blkio";

Status WriteText(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + path, errno);
  ssize_t n = write(fd, text.data(), text.size());
  int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) return ErrnoStatus("write " + path, err);
  return Status::Ok();
}

std::string ReadLine(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[64];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return "";
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// "MAJ:MIN" of the disk that holds `file`: its device, or the device's parent when that is a
// partition (sysfs puts a partition's directory inside its disk's).
StatusOr<std::string> DiskOf(const std::string& file) {
  struct stat st {};
  if (stat(file.c_str(), &st) != 0) return ErrnoStatus("stat " + file, errno);
  std::string dev = std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  std::string link = "/sys/dev/block/" + dev;
  char real[PATH_MAX];
  if (realpath(link.c_str(), real) == nullptr) {
    return FailedPrecondition(file + " is not on a block device (" + dev +
                              "): its reads cannot be throttled");
  }
  std::string dir = real;
  if (access((dir + "/partition").c_str(), F_OK) == 0) {
    std::string disk = ReadLine(dir.substr(0, dir.rfind('/')) + "/dev");
    if (!disk.empty()) return disk;
  }
  return dev;
}

}  // namespace

StatusOr<BlkioThrottle> BlkioThrottle::Create(const std::string& file, int64_t read_bps) {
  if (access((std::string(kBlkioRoot) + "/blkio.throttle.read_bps_device").c_str(), W_OK) != 0) {
    return FailedPrecondition(std::string("cgroup v1 blkio throttling is not available (") +
                              kBlkioRoot + "/blkio.throttle.read_bps_device)");
  }
  StatusOr<std::string> disk = DiskOf(file);
  if (!disk.ok()) return disk.status();
  std::string dir = std::string(kBlkioRoot) + "/gpuwhy-demo-" + std::to_string(getpid());
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + dir, errno);
  BlkioThrottle t(dir, *disk);  // removes the group if the limit cannot be set
  RETURN_IF_ERROR(
      WriteText(dir + "/blkio.throttle.read_bps_device", *disk + " " + std::to_string(read_bps)));
  return t;
}

BlkioThrottle::BlkioThrottle(BlkioThrottle&& other) noexcept
    : dir_(std::exchange(other.dir_, std::string())), device_(std::move(other.device_)) {}

BlkioThrottle::~BlkioThrottle() {
  if (!dir_.empty()) rmdir(dir_.c_str());
}

Status BlkioThrottle::Add(pid_t pid) const {
  return WriteText(dir_ + "/cgroup.procs", std::to_string(pid));
}

}  // namespace gw
