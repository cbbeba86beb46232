#include "base/trusted_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>

namespace gw {
namespace {

// Why another user than root could change this component ("" when only root can).
std::string WhoElseCanChange(const struct stat& st, bool directory) {
  if (st.st_uid != 0) return "it is owned by uid " + std::to_string(st.st_uid);
  bool sticky_dir = directory && (st.st_mode & S_ISVTX) != 0;
  if ((st.st_mode & S_IWOTH) != 0 && !sticky_dir) return "it is writable by every user";
  if ((st.st_mode & S_IWGRP) != 0 && st.st_gid != 0 && !sticky_dir) {
    return "it is writable by group " + std::to_string(st.st_gid);
  }
  return "";
}

}  // namespace

bool RunningUnderSudo() {
  if (geteuid() != 0) return false;
  const char* uid = std::getenv("SUDO_UID");
  return uid != nullptr && *uid != '\0' && std::string(uid) != "0";
}

Status CheckOnlyRootCanChange(const std::string& path, const std::string& what) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) {
    return ErrnoStatus(what + " " + path, errno);
  }
  std::string full = resolved;
  struct stat st {};
  if (stat(full.c_str(), &st) != 0) return ErrnoStatus(what + " " + path, errno);
  if (!S_ISREG(st.st_mode)) return InvalidArgument(what + " " + path + " is not a regular file");
  // The file, then every directory above it up to "/".
  std::string component = full;
  bool directory = false;
  while (true) {
    if (stat(component.c_str(), &st) != 0) return ErrnoStatus(what + " " + component, errno);
    if (std::string why = WhoElseCanChange(st, directory); !why.empty()) {
      return PermissionDenied(
          what + " " + path +
          ": gpuwhy runs as root under sudo and would load code another "
          "user can change (" +
          component + ": " + why +
          ") — hint: install the library "
          "owned by root (sudo install -o root -g root -m 0755 FILE /usr/local/lib/), or run "
          "gpuwhy as root without sudo's SUDO_UID");
    }
    if (component == "/") break;
    size_t slash = component.find_last_of('/');
    component = slash == 0 ? "/" : component.substr(0, slash);
    directory = true;
  }
  return Status::Ok();
}

Status CheckLoadableUnderSudo(const std::string& path, const std::string& what) {
  if (path.find('/') == std::string::npos || !RunningUnderSudo()) return Status::Ok();
  return CheckOnlyRootCanChange(path, what);
}

}  // namespace gw
