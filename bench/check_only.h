// bench --check_only (benchdnn's --mode=C): every selected case is set up
// and validated against its reference as before timing, and reported in one
// line instead of timed. The cases run the same body as in a timing run:
// harness.cpp's check() ends the body at its validation (check_only.h holds
// the verdicts and their lines, harness.cpp the plumbing).
#pragma once

#include <cstddef>
#include <string>

namespace dlb::bench {

struct CheckOutcome {
  enum class Verdict {
    pass,         // validated, within tolerance
    fail,         // a wrong result, or an error while setting up or validating
    unsupported,  // the variant declines the problem (dlb::Unsupported)
    bad_input,    // a file the case needs cannot be read (report_input_error)
  };
  std::string name;  // the case, as registered ("daxpy/cpu_loop/n:1024")
  Verdict verdict = Verdict::fail;
  std::string detail;  // pass/fail: the comparison's summary or the error; otherwise the reason
};

// "pass         <name>: <detail>", "FAIL         <name>: <detail>", ...
// One line, no newline.
std::string check_line(const CheckOutcome& outcome);

class CheckTally {
 public:
  void add(const CheckOutcome& outcome);
  // "check_only: 12 cases: 10 pass, 1 FAIL, 1 unsupported, 0 bad input"
  std::string summary() const;
  // 1 if any case failed, else 2 if any had bad input (as a timing run
  // exits), else 0: all passed or were unsupported.
  int exit_status() const;
  std::size_t cases() const { return pass_ + fail_ + unsupported_ + bad_input_; }

 private:
  std::size_t pass_ = 0, fail_ = 0, unsupported_ = 0, bad_input_ = 0;
};

}  // namespace dlb::bench
