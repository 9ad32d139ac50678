// One error model inside libcoll: a failure throws coll::Error carrying a C
// status code and a message with the values involved. The C API (api.cpp)
// catches it, keeps the message on the communicator and returns the code.
#pragma once

#include <coll/coll.h>

#include <cstdarg>
#include <stdexcept>
#include <string>

namespace coll {

class Error : public std::runtime_error {
 public:
  Error(int status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// A failure that every rank of an operation reached alike, from data they
// all hold after an exchange that completed (COLL_CHECK_ARGS's verdict on
// mismatched arguments): the ranks are still in step, so unlike every other
// failure inside an operation it does not fail the communicator.
class AgreedError : public Error {
 public:
  using Error::Error;
};

// printf-style formatting into a std::string.
std::string strfmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vstrfmt(const char* fmt, va_list ap);

// Throws Error(status, formatted message).
[[noreturn]] void fail(int status, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Same, with ": <strerror(err)>" appended.
[[noreturn]] void fail_errno(int status, int err, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

}  // namespace coll
