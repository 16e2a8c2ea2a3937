// The bad-input check the training and epoch tests share.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "kernels/common/error.h"

namespace dlb::test {

// Fails unless `f` throws dlb::Error whose message contains `part`.
template <class F>
void expect_error(F&& f, std::string_view part) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

}  // namespace dlb::test
