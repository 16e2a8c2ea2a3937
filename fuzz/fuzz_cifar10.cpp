// The CIFAR-10 binary reader (kernels/nn/data/dataset.cpp) on arbitrary bytes,
// written to a scratch file: either whole 3073-byte records with labels
// 0..9, or dlb::Error.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_common.h"
#include "kernels/common/error.h"
#include "kernels/nn/data/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const dlb::fuzz::Scratch path_file("cifar10");
  const std::string& path = path_file.path();
  dlb::fuzz::write_file(path, data, size);
  try {
    const auto d = dlb::nn::read_cifar10({path});
    if (d.pixels.size() != static_cast<std::size_t>(d.n) * 3 * 32 * 32 ||
        d.labels.size() != static_cast<std::size_t>(d.n))
      __builtin_trap();
    for (const auto label : d.labels)
      if (label > 9) __builtin_trap();
  } catch (const dlb::Error&) {
  }
  return 0;
}
