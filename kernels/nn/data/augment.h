// What a training batch is, apart from the pixels (loader.h makes it, its
// reference ref::augmented_batch checks it): the network's input format and
// each image's augmentation, a pure function of (seed, the image's index in
// the data set) so that a batch is the same whatever the thread count. A
// description with no computation of a batch: the reference may use it
// (docs/architecture.md). augment_of is defined in augment.cpp, part of the
// descriptions' library (dlb_description) the reference links.
#pragma once

#include <cstdint>

namespace dlb::nn {

struct Augment {
  std::int64_t pad = 4;  // crop offsets in [0, 2 pad]; 0: no crop
  bool flip = true;
};

// The crop offset (top-left of the h x w window in the padded image) and
// flip of image `index`.
struct ImageAugment {
  std::int64_t dy = 0, dx = 0;
  bool flip = false;
};
ImageAugment augment_of(std::uint64_t seed, std::int64_t index, const Augment& augment);

// splitmix64 (Steele, Lea and Flood): the counter-based generator every
// draw of the data takes its bits from (augment_of above; the epoch's
// initial weights and batch order, train/epoch.h).
std::uint64_t splitmix64(std::uint64_t x);

// Input layout of the network: c x h x w, and the normalization.
struct BatchFormat {
  std::int64_t c = 1, h = 28, w = 28;
  float mean = 0, std_dev = 1;
};

}  // namespace dlb::nn
