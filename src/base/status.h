// Status and StatusOr: the one error model used across gpuwhy.
//
// Environment failures (missing file, EPERM, bad SQL, corrupt data) are returned as a Status.
// Broken invariants use GW_CHECK, which aborts. Exceptions thrown by third-party libraries are
// caught at the boundary of that library and turned into a Status.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace gw {

enum class StatusCode {
  kOk,
  kInvalidArgument,  // bad user input: flag, SQL, duration
  kNotFound,         // file, library, symbol, session
  kPermissionDenied, // EPERM/EACCES, or a write refused by a read-only handle
  kFailedPrecondition,  // the environment cannot do this (no BTF, newer schema)
  kDataLoss,         // corrupt or foreign file
  kUnavailable,      // transient: busy database
  kInternal,
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with context, e.g. "open database /x: " + message.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status PermissionDenied(std::string m) {
  return Status(StatusCode::kPermissionDenied, std::move(m));
}
inline Status FailedPrecondition(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
inline Status DataLoss(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }
inline Status Unavailable(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

// Builds an error from errno-style codes: "open /x: No such file or directory".
Status ErrnoStatus(const std::string& what, int err);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) {
      std::fprintf(stderr, "gpuwhy: internal error: StatusOr built from an OK status\n");
      std::abort();
    }
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace gw

#define GW_CONCAT_INNER(a, b) a##b
#define GW_CONCAT(a, b) GW_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)             \
  do {                                    \
    ::gw::Status gw_status_ = (expr);     \
    if (!gw_status_.ok()) return gw_status_; \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(GW_CONCAT(gw_statusor_, __LINE__), lhs, expr)

// Invariant check: aborts with the location. Not for environment failures.
#define GW_CHECK(cond)                                                                 \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "gpuwhy: CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)
