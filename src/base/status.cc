#include "base/status.h"

#include <cerrno>
#include <cstring>

namespace gw {

Status ErrnoStatus(const std::string& what, int err) {
  std::string text = what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
      return NotFound(text);
    case EPERM:
    case EACCES:
      return PermissionDenied(text);
    case EINVAL:
      return InvalidArgument(text);
    case EBUSY:
    case EAGAIN:
      return Unavailable(text);
    default:
      return Internal(text);
  }
}

}  // namespace gw
