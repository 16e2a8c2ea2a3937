// What the fuzz targets share: the rule (a parser either returns or throws
// dlb::Error; anything else, a crash or a sanitizer report, is a finding)
// and a scratch file for the readers that take paths.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace dlb::fuzz {

// A file of this process in the temporary directory, rewritten per input and
// removed when the fuzzer exits.
class Scratch {
 public:
  explicit Scratch(const char* name) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/dlb_fuzz_" + name + "_" +
            std::to_string(::getpid());
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size != 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
}

}  // namespace dlb::fuzz
