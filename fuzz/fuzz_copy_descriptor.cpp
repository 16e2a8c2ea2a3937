// --copy=bytes:B, with the K, M, G suffixes (bench/descriptor.cpp).
#include "fuzz/fuzz_descriptor.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dlb::bench;
  return dlb::fuzz::check_descriptor(data, size, parse_copy_descriptor, [](const CopyShape& s) {
    // size_text must read back as the same number of bytes.
    return s.bytes >= 1 && s.bytes <= kMaxCopyBytes &&
           parse_copy_descriptor("bytes:" + size_text(s.bytes)).bytes == s.bytes;
  });
}
