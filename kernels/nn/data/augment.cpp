// Each image's augmentation draw (augment.h): a description, in
// dlb_description, so that the loader (loader.cpp) and its reference
// (ref::augmented_batch) draw the same crop and flip from one definition
// and the reference links no loader code.
#include "kernels/nn/data/augment.h"

namespace dlb::nn {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

ImageAugment augment_of(std::uint64_t seed, std::int64_t index, const Augment& augment) {
  const std::uint64_t r = splitmix64(splitmix64(seed) ^ static_cast<std::uint64_t>(index));
  const auto span = static_cast<std::uint64_t>(2 * augment.pad + 1);
  return {static_cast<std::int64_t>((r & 0xFFFF) % span), static_cast<std::int64_t>(((r >> 16) & 0xFFFF) % span),
          augment.flip && ((r >> 32) & 1) != 0};
}

}  // namespace dlb::nn
