// Status: the result of a fallible runtime/ or delegates/ call. The runtime
// does not throw; every such call returns a Status and callers propagate it.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace dfarm::runtime {

// One list, so a code and its name cannot drift apart.
#define DFARM_STATUS_CODES(X)                                                     \
  X(kOk, "ok")                                                                    \
  /* The model, its data or an input is bad. */                                   \
  X(kError, "error")                                                              \
  /* Well-formed, but uses an op, dtype or feature we lack. */                    \
  X(kUnsupported, "unsupported")                                                  \
  /* The caller broke a precondition (e.g. Invoke() before AllocateTensors()). */ \
  X(kInvalidArgument, "invalid_argument")

enum class StatusCode {
#define DFARM_STATUS_ENUM(code, name) code,
  DFARM_STATUS_CODES(DFARM_STATUS_ENUM)
#undef DFARM_STATUS_ENUM
};

constexpr const char* StatusCodeName(StatusCode code) {
  switch (code) {
#define DFARM_STATUS_NAME(code, name) \
  case StatusCode::code:              \
    return name;
    DFARM_STATUS_CODES(DFARM_STATUS_NAME)
#undef DFARM_STATUS_NAME
  }
  return "unknown";
}

class [[nodiscard]] Status {
 public:
  Status() = default;

  static Status Ok() { return Status(); }
  static Status Error(std::string message) {
    return Status(StatusCode::kError, std::move(message));
  }
  static Status Unsupported(std::string message) {
    return Status(StatusCode::kUnsupported, std::move(message));
  }
  static Status InvalidArgument(std::string message) {
    return Status(StatusCode::kInvalidArgument, std::move(message));
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  // One line naming the thing at fault and why; empty when ok().
  const std::string& message() const { return message_; }

  // The same status with "prefix: " in front of its message (no-op when ok()).
  Status WithPrefix(std::string_view prefix) const {
    if (ok()) return *this;
    return Status(code_, std::string(prefix) + ": " + message_);
  }

 private:
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace dfarm::runtime

// Returns from the calling function when `expr` yields a failed Status.
#define DFARM_RETURN_IF_ERROR(expr)                  \
  do {                                               \
    ::dfarm::runtime::Status dfarm_status_ = (expr); \
    if (!dfarm_status_.ok()) return dfarm_status_;   \
  } while (false)
