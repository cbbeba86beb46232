// Where a database file may be written, and as whom (issue 12, critical).
//
// `trace` runs as root, often under sudo for a user whose home holds the database. Root must
// never follow a link that user planted, nor hand them a file they could not touch before.
// PrepareDatabaseLocation walks the directory path from "/" one component at a time with
// O_NOFOLLOW descriptors and refuses:
//   - a directory on the path owned by anyone but root or the database's owner, or writable by
//     others (sticky directories such as /tmp excepted);
//   - a database directory, file, -wal, -shm or -journal that is a symbolic link;
//   - a database file (or -wal/-shm/-journal) not owned by the owner, not regular, or with
//     other hard links.
// When the path runs through a directory the user owns, every later file operation (creating
// directories, SQLite creating the database, -wal and -shm) runs with the user's filesystem
// identity (setfsuid/setfsgid and the user's groups, on the calling thread only): the kernel
// then checks them as the user, so a link swapped in after the checks leads nowhere the user
// could not already write. New directories are 0700, new databases 0600.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace gw {

// The user a database is written for: under sudo (root with SUDO_USER set to another user) that
// user, else the process's own user.
struct DatabaseOwner {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
};
DatabaseOwner InvokingDatabaseOwner();

struct DatabaseLocation {
  std::string path;       // as given (what messages show)
  std::string open_path;  // the same file with every link resolved: what SQLite opens
  DatabaseOwner owner;
  // True when file operations must run as `owner` (ScopedFsIdentity); false when the process
  // works as itself (not root, or root writing into directories only root controls).
  bool as_owner = false;
  // True when open_path is free of links, so SQLite may be told not to follow any.
  bool no_links = false;
};

// The database file a writer opened: where and as whom, and its identity (device, inode), so
// that a second reader of the same recording (trace --prometheus's analysis) opens that file
// with the same checks and notices when the path names another file since.
struct DatabaseFile {
  DatabaseLocation location;
  dev_t dev = 0;
  ino_t ino = 0;
};

// Checks (and creates, 0700) the directories of `path` and creates the database file (0600)
// when missing; see the file comment for what is refused.
StatusOr<DatabaseLocation> PrepareDatabaseLocation(const std::string& path);

// Switches the calling thread's filesystem identity to a user (fsuid, fsgid, supplementary
// groups) and back on destruction. Threads started while one is active inherit the identity.
// Inactive when default-constructed or when `active` is false.
class ScopedFsIdentity {
 public:
  ScopedFsIdentity() = default;
  ScopedFsIdentity(bool active, uid_t uid, gid_t gid);
  explicit ScopedFsIdentity(const DatabaseLocation& location)
      : ScopedFsIdentity(location.as_owner, location.owner.uid, location.owner.gid) {}
  ~ScopedFsIdentity();
  ScopedFsIdentity(const ScopedFsIdentity&) = delete;
  ScopedFsIdentity& operator=(const ScopedFsIdentity&) = delete;

 private:
  bool active_ = false;
  bool groups_set_ = false;
  uid_t saved_uid_ = 0;
  gid_t saved_gid_ = 0;
  std::vector<gid_t> saved_groups_;
};

// The first `max_bytes` of a regular file a user named (a password file, a traced job's source
// file), read the way that user would: under sudo with the invoking user's identity, so root
// never hands over a file that user could not read. Opened without blocking and without
// becoming a controlling terminal: a FIFO or a device is refused ("not a regular file").
// `what` names the file in messages.
StatusOr<std::string> ReadFileAsInvokingUser(const std::string& path, size_t max_bytes,
                                             const std::string& what);

}  // namespace gw
