// The data-loading phase of a training step (issue 35): images of an
// in-memory data set (dataset.h) into a float batch, with the augmentation
// of the CIFAR recipe: a random crop of the image zero-padded by `pad` on
// every side (torchvision's RandomCrop(size, padding=pad)), then a
// horizontal flip with probability 1/2 (RandomHorizontalFlip).
//
// Each image's crop and flip are a pure function of (seed, its index in the
// data set): a batch is the same whatever the thread count, and an epoch is
// reproducible. Pixels are normalized as network_input does ((p / 255 -
// mean) / std, in float), placed centred in the network's h x w (a 28 x 28
// image in resnet20's 32 x 32: 2 pixels of zeros on every side), and the
// padding, like network_input's, is zeros after normalization.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/nn/data/augment.h"
#include "kernels/nn/data/dataset.h"

namespace dlb::nn {

// out [indices.size(), c, h, w], labels [indices.size()]. threads: 0 runs
// in the calling thread, n > 0 on n OpenMP threads. Throws dlb::Error for an
// index outside the data set, a network input smaller than the images,
// channels that cannot be matched, a negative pad or thread count.
void load_batch(const Dataset& data, std::span<const std::int64_t> indices, const BatchFormat& format,
                const Augment& augment, std::uint64_t seed, int threads, float* out, std::uint8_t* labels);

}  // namespace dlb::nn
