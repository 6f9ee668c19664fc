// SPDX-License-Identifier: Apache-2.0
// The result of every host entry point: ok, or an error that names the problem.
#pragma once

#include <string>
#include <utility>

namespace flashmma {

enum class ErrorCode : int {
  kOk = 0,
  kInvalidArgument,     // a params field is wrong; nothing was launched
  kUnsupportedDevice,   // the device or the build cannot run the kernel
  kCudaError,           // the CUDA runtime reported an error
};

// A small value type: no exceptions cross the library boundary, so the library can be used from
// engines built with -fno-exceptions. The functions that return it are [[nodiscard]], so errors
// are not dropped silently. (The class itself is not: nvcc then warns on `status = f();`.)
class Status {
 public:
  Status() = default;
  static Status success() { return Status(); }
  static Status error(ErrorCode code, std::string message) {
    return Status(code, std::move(message));
  }

  bool ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return ok(); }
  ErrorCode code() const { return code_; }
  // "ok" on success, else a sentence that names the argument and what was expected.
  const std::string& message() const { return message_; }

 private:
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_ = "ok";
};

}  // namespace flashmma
