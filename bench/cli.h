// Argument parsing shared by the small command-line tools (classify,
// calibrate, train_epoch): --flag=value pairs and counts, errors as
// dlb::Error.
#pragma once

#include <charconv>
#include <cstdio>
#include <exception>
#include <functional>
#include <initializer_list>
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

// One flag of a tool: "--name=value" (a non-empty value) calls take(value);
// a switch (takes_value false) is "--name" alone and calls take("").
struct Flag {
  std::string_view name;
  std::function<void(std::string_view value)> take;
  bool takes_value = true;
};

// Reads argv[1..] by `flags`, in order. --help or -h prints `usage` and
// returns false (the tool ends with status 0); an argument that no flag
// takes throws dlb::Error naming it, with the usage.
inline bool parse_flags(int argc, char** argv, std::initializer_list<Flag> flags, std::string_view usage) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%.*s\n", static_cast<int>(usage.size()), usage.data());
      return false;
    }
    const Flag* taken = nullptr;
    std::string_view value;
    for (const Flag& f : flags) {
      if (f.takes_value ? (flag_value(arg, f.name).has_value()) : arg == f.name) {
        taken = &f;
        if (f.takes_value) value = *flag_value(arg, f.name);
        break;
      }
    }
    if (taken == nullptr) throw Error("unknown argument '" + std::string(arg) + "'\n" + std::string(usage));
    taken->take(value);
  }
  return true;
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
