#include "store/db_location.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <deque>

#include "base/scoped.h"
#include "base/trusted_path.h"

namespace gw {

namespace {

std::string UserName(uid_t uid) {
  if (struct passwd* pw = getpwuid(uid)) return pw->pw_name;
  return "uid " + std::to_string(uid);
}

std::string GroupName(gid_t gid) {
  if (struct group* gr = getgrgid(gid)) return gr->gr_name;
  return "gid " + std::to_string(gid);
}

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    if (slash > start) parts.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

std::string Join(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

std::string OwnerHint(const DatabaseOwner& owner) {
  return owner.uid == 0 ? "root (gpuwhy runs as root without sudo, so the database is root's)"
                        : owner.name + " (the user who ran sudo; the database is written for them)";
}

// A directory on the way to the database: only root and the owner may control it.
Status CheckDirectory(const std::string& path, const struct stat& st, const DatabaseOwner& owner) {
  const std::string hint =
      " — hint: pass --db (or GPUWHY_DB) with a path whose directories belong to " +
      (owner.uid == 0 ? std::string("root") : owner.name + " or root") +
      (owner.uid == 0 ? ", or run gpuwhy under sudo as the user who owns it" : "");
  if (st.st_uid != 0 && st.st_uid != owner.uid) {
    return PermissionDenied("database directory " + path + " is owned by " + UserName(st.st_uid) +
                            ", not by " + OwnerHint(owner) + hint);
  }
  bool sticky = (st.st_mode & S_ISVTX) != 0;
  if ((st.st_mode & S_IWOTH) && !sticky) {
    return PermissionDenied("database directory " + path + " is writable by every user" + hint);
  }
  if ((st.st_mode & S_IWGRP) && !sticky && st.st_gid != 0 && st.st_gid != owner.gid) {
    return PermissionDenied("database directory " + path + " is writable by group " +
                            GroupName(st.st_gid) + hint);
  }
  return Status::Ok();
}

// A database file or one of SQLite's side files, as found (not followed) in `dir_fd`.
Status CheckFile(const std::string& path, const struct stat& st, const DatabaseLocation& loc) {
  if (S_ISLNK(st.st_mode)) {
    return PermissionDenied(path + " is a symbolic link; gpuwhy does not follow links for its "
                            "database files — hint: remove it, or pass --db with the real path");
  }
  if (!S_ISREG(st.st_mode)) return FailedPrecondition(path + " exists and is not a regular file");
  // Root may always open root's files; under sudo they must be the user's, unless the whole path
  // is root's (then only root could have made them).
  bool owner_ok = st.st_uid == loc.owner.uid || (!loc.as_owner && st.st_uid == 0);
  if (!owner_ok) {
    return PermissionDenied(path + " is not owned by " + loc.owner.name + " (it belongs to " +
                            UserName(st.st_uid) + ") — hint: gpuwhy writes databases only into " +
                            "files of the user it records for; remove it or pass another --db");
  }
  if (st.st_nlink > 1) {
    return PermissionDenied(path + " has " + std::to_string(st.st_nlink) +
                            " hard links; gpuwhy will not write a database file that is also "
                            "elsewhere — hint: remove it or pass another --db");
  }
  return Status::Ok();
}

struct Walk {
  ScopedFd fd;
  std::string resolved;  // absolute, without links
  bool followed_link = false;
  bool through_owner_dir = false;  // some directory on the way is the owner's (not root's)
  bool shared = false;             // the current directory is sticky and writable by all (/tmp)
};

StatusOr<ScopedFd> OpenDir(int at, const char* name, const std::string& path) {
  int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP || errno == ENOTDIR) {
      return PermissionDenied(path + " changed into a symbolic link or file while gpuwhy checked "
                              "it; refusing to write the database there");
    }
    return ErrnoStatus("open directory " + path, errno);
  }
  return ScopedFd(fd);
}

// Resolves `dir` from "/" through descriptors, creating missing components (0700), checking
// every directory. Links are followed only inside directories already checked (so only root or
// the owner can have made them), and never for the last component.
StatusOr<Walk> WalkDirectory(const std::string& dir, const DatabaseOwner& owner, bool root) {
  Walk w;
  ASSIGN_OR_RETURN(w.fd, OpenDir(AT_FDCWD, "/", "/"));
  w.resolved = "/";
  std::deque<std::string> todo;
  for (std::string& p : SplitPath(dir)) todo.push_back(std::move(p));
  int links = 0;
  auto check = [&](const std::string& path) -> Status {
    if (!root) return Status::Ok();
    struct stat st;
    if (fstat(w.fd.get(), &st) != 0) return ErrnoStatus("stat " + path, errno);
    RETURN_IF_ERROR(CheckDirectory(path, st, owner));
    if (st.st_uid != 0) w.through_owner_dir = true;
    w.shared = (st.st_mode & S_ISVTX) && (st.st_mode & S_IWOTH);
    return Status::Ok();
  };
  RETURN_IF_ERROR(check("/"));
  while (!todo.empty()) {
    std::string name = std::move(todo.front());
    todo.pop_front();
    if (name == ".") continue;
    if (name == "..") {
      ASSIGN_OR_RETURN(w.fd, OpenDir(w.fd.get(), "..", w.resolved + "/.."));
      size_t slash = w.resolved.rfind('/');
      w.resolved = slash == 0 ? "/" : w.resolved.substr(0, slash);
      continue;  // a directory this walk went through already
    }
    std::string path = Join(w.resolved, name);
    bool last = todo.empty();
    struct stat st;
    if (fstatat(w.fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) return ErrnoStatus("stat " + path, errno);
      {
        // In the owner's directory, or a shared one like /tmp, the new one is made by the owner
        // (so it is theirs without a chown by name later).
        ScopedFsIdentity as_owner(root && owner.uid != 0 && (w.through_owner_dir || w.shared),
                                  owner.uid, owner.gid);
        if (mkdirat(w.fd.get(), name.c_str(), 0700) != 0 && errno != EEXIST) {
          return ErrnoStatus("create directory " + path, errno);
        }
      }
      if (fstatat(w.fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return ErrnoStatus("stat " + path, errno);
      }
    }
    if (S_ISLNK(st.st_mode)) {
      if (last && root) {
        return PermissionDenied("database directory " + path +
                                " is a symbolic link; gpuwhy does not follow links for its "
                                "database directory — hint: pass --db with the real path");
      }
      if (++links > 40) return FailedPrecondition(path + ": too many levels of symbolic links");
      char target[PATH_MAX];
      ssize_t n = readlinkat(w.fd.get(), name.c_str(), target, sizeof(target) - 1);
      if (n < 0) return ErrnoStatus("read link " + path, errno);
      target[n] = '\0';
      std::vector<std::string> parts = SplitPath(target);
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo.push_front(*it);
      if (target[0] == '/') {
        ASSIGN_OR_RETURN(w.fd, OpenDir(AT_FDCWD, "/", "/"));
        w.resolved = "/";
      }
      w.followed_link = true;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) return FailedPrecondition(path + " exists and is not a directory");
    ASSIGN_OR_RETURN(w.fd, OpenDir(w.fd.get(), name.c_str(), path));
    w.resolved = path;
    RETURN_IF_ERROR(check(path));
  }
  return w;
}

}  // namespace

DatabaseOwner InvokingDatabaseOwner() {
  DatabaseOwner owner;
  owner.uid = geteuid();
  owner.gid = getegid();
  const char* sudo_user = std::getenv("SUDO_USER");
  if (owner.uid == 0 && sudo_user != nullptr && *sudo_user != '\0' &&
      std::string(sudo_user) != "root") {
    if (struct passwd* pw = getpwnam(sudo_user)) {
      owner.uid = pw->pw_uid;
      owner.gid = pw->pw_gid;
    }
  }
  owner.name = UserName(owner.uid);
  return owner;
}

StatusOr<DatabaseLocation> PrepareDatabaseLocation(const std::string& path) {
  if (path.empty()) return InvalidArgument("empty database path");
  DatabaseLocation loc;
  loc.path = path;
  loc.owner = InvokingDatabaseOwner();
  bool root = geteuid() == 0;
  std::string abs = path;
  if (abs[0] != '/') {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) == nullptr) return ErrnoStatus("current directory", errno);
    abs = Join(cwd, path);
  }
  size_t slash = abs.rfind('/');
  std::string dir = slash == 0 ? "/" : abs.substr(0, slash);
  std::string base = abs.substr(slash + 1);
  if (base.empty() || base == "." || base == "..") {
    return InvalidArgument("database path " + path + " names a directory, not a file");
  }
  ASSIGN_OR_RETURN(Walk walk, WalkDirectory(dir, loc.owner, root));
  // Files go in as the owner wherever the owner (or anyone, in /tmp) could change the path; as
  // root only where root alone controls every directory.
  loc.as_owner = root && loc.owner.uid != 0 && (walk.through_owner_dir || walk.shared);
  loc.open_path = Join(walk.resolved, base);
  loc.no_links = root;  // a user's own links are theirs to follow
  int dir_fd = walk.fd.get();
  if (root) {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      std::string name = base + suffix;
      struct stat st;
      if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        RETURN_IF_ERROR(CheckFile(path + suffix, st, loc));
      } else if (errno != ENOENT) {
        return ErrnoStatus("stat " + path + suffix, errno);
      }
    }
  }
  // Create the database file here (0600, as the owner where needed) or check the one there,
  // through a descriptor: SQLite then opens a file that is already the right one.
  ScopedFd file;
  bool created = false;
  {
    ScopedFsIdentity as_owner(loc);
    int nofollow = root ? O_NOFOLLOW : 0;
    int fd = openat(dir_fd, base.c_str(), O_RDWR | O_CREAT | O_EXCL | nofollow | O_CLOEXEC, 0600);
    if (fd >= 0) {
      created = true;
    } else if (errno == EEXIST) {
      fd = openat(dir_fd, base.c_str(), O_RDWR | nofollow | O_CLOEXEC | O_NONBLOCK);
    }
    if (fd < 0) {
      int err = errno;
      if (err == ELOOP) {
        struct stat st {};
        st.st_mode = S_IFLNK;
        return CheckFile(path, st, loc);
      }
      std::string as = loc.as_owner ? " as " + loc.owner.name : "";
      return ErrnoStatus("open database " + path + as, err);
    }
    file.Reset(fd);
  }
  struct stat st;
  if (fstat(file.get(), &st) != 0) return ErrnoStatus("stat " + path, errno);
  if (root) RETURN_IF_ERROR(CheckFile(path, st, loc));
  // Root wrote a new file into root's directories for a sudo user: hand it over through the
  // descriptor (SQLite gives -wal and -shm the database file's owner itself).
  if (created && root && !loc.as_owner && loc.owner.uid != 0 && st.st_uid == 0) {
    if (fchown(file.get(), loc.owner.uid, loc.owner.gid) != 0) {
      return ErrnoStatus("hand " + path + " to " + loc.owner.name, errno);
    }
  }
  return loc;
}

ScopedFsIdentity::ScopedFsIdentity(bool active, uid_t uid, gid_t gid) {
  if (!active) return;
  int n = getgroups(0, nullptr);
  GW_CHECK(n >= 0);
  saved_groups_.resize(static_cast<size_t>(n));
  GW_CHECK(getgroups(n, saved_groups_.data()) == n);
  // The raw system call changes this thread only (glibc's setgroups changes every thread).
  // Without CAP_SETGID (a root with capabilities dropped) the groups stay; fsuid/fsgid still
  // make the kernel check file access as the user for owner and group bits.
  groups_set_ = syscall(SYS_setgroups, 1, &gid) == 0;
  saved_gid_ = static_cast<gid_t>(setfsgid(gid));
  saved_uid_ = static_cast<uid_t>(setfsuid(uid));
  // setfsuid reports no failure: read the identity back.
  GW_CHECK(static_cast<uid_t>(setfsuid(static_cast<uid_t>(-1))) == uid);
  GW_CHECK(static_cast<gid_t>(setfsgid(static_cast<gid_t>(-1))) == gid);
  active_ = true;
}

ScopedFsIdentity::~ScopedFsIdentity() {
  if (!active_) return;
  setfsuid(saved_uid_);
  setfsgid(saved_gid_);
  GW_CHECK(static_cast<uid_t>(setfsuid(static_cast<uid_t>(-1))) == saved_uid_);
  if (groups_set_) {
    GW_CHECK(syscall(SYS_setgroups, saved_groups_.size(), saved_groups_.data()) == 0);
  }
}

StatusOr<std::string> ReadFileAsInvokingUser(const std::string& path, size_t max_bytes,
                                             const std::string& what) {
  DatabaseOwner user = InvokingDatabaseOwner();
  ScopedFsIdentity as_user(RunningUnderSudo(), user.uid, user.gid);
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd) return ErrnoStatus(what, errno);
  struct stat st;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return InvalidArgument(what + " is not a regular file");
  }
  std::string text(std::min(static_cast<size_t>(st.st_size), max_bytes), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(what, errno);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

}  // namespace gw
