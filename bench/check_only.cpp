#include "bench/check_only.h"

namespace dlb::bench {

std::string check_line(const CheckOutcome& outcome) {
  using V = CheckOutcome::Verdict;
  const char* word = outcome.verdict == V::pass          ? "pass"
                     : outcome.verdict == V::fail        ? "FAIL"
                     : outcome.verdict == V::unsupported ? "unsupported"
                                                         : "bad input";
  std::string line(word);
  line.resize(13, ' ');  // the names line up
  line.append(outcome.name);
  if (!outcome.detail.empty()) line.append(": ").append(outcome.detail);
  for (char& c : line)
    if (c == '\n') c = ' ';  // one line per case, whatever the message holds
  return line;
}

void CheckTally::add(const CheckOutcome& outcome) {
  switch (outcome.verdict) {
    case CheckOutcome::Verdict::pass: ++pass_; break;
    case CheckOutcome::Verdict::fail: ++fail_; break;
    case CheckOutcome::Verdict::unsupported: ++unsupported_; break;
    case CheckOutcome::Verdict::bad_input: ++bad_input_; break;
  }
}

std::string CheckTally::summary() const {
  return "check_only: " + std::to_string(cases()) + (cases() == 1 ? " case: " : " cases: ") + std::to_string(pass_) +
         " pass, " + std::to_string(fail_) + " FAIL, " + std::to_string(unsupported_) + " unsupported, " +
         std::to_string(bad_input_) + " bad input";
}

int CheckTally::exit_status() const { return fail_ > 0 ? 1 : bad_input_ > 0 ? 2 : 0; }

}  // namespace dlb::bench
