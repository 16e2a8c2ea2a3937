// The IDX reader (kernels/nn/data/dataset.cpp; plain or gzip, through zlib) on
// arbitrary bytes: the input is split into an images file and a labels file
// (the first two bytes give where), written to scratch files and read; either
// a data set whose sizes agree, or dlb::Error.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_common.h"
#include "kernels/common/error.h"
#include "kernels/nn/data/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t split = std::min<std::size_t>((std::size_t{data[0]} << 8 | data[1]), size - 2);
  static const dlb::fuzz::Scratch images_file("idx_images");
  const std::string& images = images_file.path();
  static const dlb::fuzz::Scratch labels_file("idx_labels");
  const std::string& labels = labels_file.path();
  dlb::fuzz::write_file(images, data + 2, split);
  dlb::fuzz::write_file(labels, data + 2 + split, size - 2 - split);
  try {
    const auto d = dlb::nn::read_idx(images, labels);
    if (d.pixels.size() != static_cast<std::size_t>(d.n * d.c * d.h * d.w) ||
        d.labels.size() != static_cast<std::size_t>(d.n))
      __builtin_trap();
  } catch (const dlb::Error&) {
  }
  return 0;
}
