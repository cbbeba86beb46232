// Files a root gpuwhy loads code from. Under sudo (root with SUDO_UID naming another user) a
// library the caller names (--nvml-lib) would run as root: it must be a file only root can
// change — owned by root, as is every directory above it, none writable by others (or by a
// group other than root's; sticky directories such as /tmp excepted for the directories).
#pragma once

#include <string>

#include "base/status.h"

namespace gw {

// True when the process is root started by sudo for another user (SUDO_UID set and not 0).
bool RunningUnderSudo();

// Ok when only root can change `path` (a file) and the directories that lead to it, links
// resolved; PermissionDenied naming the first component that another user could change.
// `what` names the flag in the message ("--nvml-lib").
Status CheckOnlyRootCanChange(const std::string& path, const std::string& what);

// CheckOnlyRootCanChange under sudo for a path with a '/' (a bare soname is looked up by the
// loader in the system's directories); Ok otherwise.
Status CheckLoadableUnderSudo(const std::string& path, const std::string& what);

}  // namespace gw
