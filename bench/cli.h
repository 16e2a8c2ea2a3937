// Argument parsing shared by the small command-line tools (classify,
// calibrate): --flag=value pairs and counts, errors as dlb::Error.
#pragma once

#include <charconv>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/common/error.h"

namespace dlb::cli {

// The value of `arg` if it is `flag=value` with a non-empty value.
inline std::optional<std::string_view> flag_value(std::string_view arg, std::string_view flag) {
  if (arg.substr(0, flag.size()) == flag && arg.size() > flag.size() + 1 && arg[flag.size()] == '=')
    return arg.substr(flag.size() + 1);
  return std::nullopt;
}

inline long long parse_count(std::string_view flag, std::string_view text) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    throw Error(std::string(flag) + " needs a non-negative integer, got '" + std::string(text) + "'");
  return v;
}

// main() of a tool: run(argc, argv)'s status, or an error's message as
// "<tool>: <message>" on stderr and exit status 2.
template <class Run>
int main_reporting_errors(const char* tool, Run run, int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", tool, e.what());
    return 2;
  }
}

}  // namespace dlb::cli
