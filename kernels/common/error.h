// dlbench errors: one exception type for failed library calls and bad input,
// and a marker for "this variant has no implementation for this problem".
#pragma once

#include <stdexcept>
#include <string>

namespace dlb {

// A failed call or a violated precondition. The message names the call (or the
// problem), the file and line, and the library's own error string.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown by a variant's prepare step when it cannot run this problem (a cuDNN
// algorithm that does not support the shape, an ISA the CPU lacks...). The
// benchmark reports it as a skipped case with this message; tests accept it.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_error(const std::string& what, const char* file, int line);

}  // namespace dlb

// DLB_REQUIRE(cond, message): precondition check that throws dlb::Error.
#define DLB_REQUIRE(cond, msg)                                                        \
  do {                                                                                \
    if (!(cond)) ::dlb::throw_error(std::string("requirement failed: ") + (msg) +     \
                                        " (" #cond ")",                               \
                                    __FILE__, __LINE__);                              \
  } while (0)
