// What every example's main() does around its recipe (not part of any
// recipe): count the problems it checked and the failures, each failure one
// "FAIL: ..." line, a planted wrong row that must not pass, and a last line
// saying what was checked, passed or FAILED, with the exit status ctest reads.
#pragma once

#include <cstdio>
#include <string>

namespace dlb::example {

class Checks {
 public:
  void fail(const std::string& what) {
    std::printf("FAIL: %s\n", what.c_str());
    ++failures_;
  }
  // One problem checked; `what` names it and its result where it failed.
  void check(bool ok, const std::string& what) {
    ++checked_;
    if (!ok) fail(what);
  }
  // The checks must be able to fail: a planted row (`wrong`: what it gets
  // wrong) that passed the check its rows passed is a failure.
  void planted(bool passed, const std::string& wrong) {
    if (passed) fail("the planted row (" + wrong + ") passed validation");
  }
  int checked() const { return checked_; }
  // "<example>: <summary>: passed" (or FAILED); the exit status.
  int finish(const char* example, const std::string& summary) const {
    std::printf("%s: %s: %s\n", example, summary.c_str(), failures_ == 0 ? "passed" : "FAILED");
    return failures_ == 0 ? 0 : 1;
  }

 private:
  int failures_ = 0, checked_ = 0;
};

}  // namespace dlb::example
