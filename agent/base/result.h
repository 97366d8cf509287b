// Result<T>: the value of a call that can fail on user input, a device or the
// wire, or the message that says why it failed. Used by agent/, harness/,
// reports/ and gui/ (runtime/ and delegates/ return a Status instead).
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace dfarm {

// An error message that names the thing at fault and why, e.g.
// "failed to load model 'face.tflite': tensor 17 refers to buffer 90, but the model has 64
// buffers".
// What kind of failure an Error is, for a program that maps failures to exit
// codes (dfarm: kInvalidInput and kNotFound are usage errors, exit 2; the rest
// exit 3). Wrapping an error's message in a new one keeps no kind: pass the
// kind on with MakeError(kind, ...) where it still holds.
enum class ErrorKind {
  kFailed,        // the device, the store, the wire or the system failed
  kInvalidInput,  // what the user gave is wrong: an argument, a spec, a policy
  kNotFound,      // the user named something that does not exist: a run, a job
  kConflict,      // someone else holds it now: a job claim whose lease expired (store)
  kTransient,     // the store rolled a transaction back (a deadlock, a serialization
                  // failure): nothing of it was written, and running it again can succeed
};

struct Error {
  std::string message;
  ErrorKind kind = ErrorKind::kFailed;
};

inline Error MakeError(std::string message) {
  return Error{std::move(message), ErrorKind::kFailed};
}
inline Error MakeError(ErrorKind kind, std::string message) {
  return Error{std::move(message), kind};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // Precondition: ok().
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // Precondition: !ok().
  const Error& error() const { return std::get<1>(v_); }
  const std::string& message() const { return error().message; }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an error.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error)
      : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }
  const std::string& message() const { return error_.message; }

 private:
  Error error_;
  bool ok_ = true;
};

inline Result<void> Ok() { return {}; }

}  // namespace dfarm
