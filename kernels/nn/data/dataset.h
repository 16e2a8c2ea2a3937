// Labelled image data sets, as bytes: Fashion-MNIST / MNIST in IDX files
// (gzip or plain, read with zlib), CIFAR-10 in its binary batches. Every
// reader checks what it reads (magic number, dimensions, length, labels in
// range, nothing after the end) and throws dlb::Error naming the file and
// the problem: a truncated or corrupted file never yields images.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlb::nn {

struct Dataset {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // images [n, c, h, w] of 0..255
  std::vector<std::uint8_t> pixels;
  std::vector<std::uint8_t> labels;         // [n], 0..9
  std::string source;                       // where it was read from
};

// IDX (Y. LeCun's format, the MNIST files): magic 0x0000 08 <ndim>, big-endian
// uint32 dimensions, then unsigned bytes. gzip-compressed or plain.
// Images: ndim 3 [n, h, w]; labels: ndim 1 [n].
Dataset read_idx(const std::string& images_path, const std::string& labels_path);

// CIFAR-10 binary version: records of 1 label byte + 3072 pixel bytes
// (3 x 32 x 32, channel-major), concatenated over the given files.
Dataset read_cifar10(const std::vector<std::string>& paths);

// Where Fashion-MNIST is: $DLB_FASHION_MNIST_DIR, else the directory of the
// Debian package dataset-fashion-mnist (/usr/share/datasets/fashion-mnist).
std::string fashion_mnist_dir();
// The test set (t10k, 10,000 images); throws naming the directory and how to
// install the package when it is not there.
const Dataset& fashion_mnist_test();
// The training set (train, 60,000 images): what calibration reads.
const Dataset& fashion_mnist_train();

// The network input of images [first, first + count) of `data`: pixels / 255,
// normalized (x - mean) / std, zero-padded (after normalization) to h x w
// centred, and the one channel repeated when the network wants c of them.
// out: [count, c, h, w].
void network_input(const Dataset& data, std::int64_t first, std::int64_t count, float mean, float std_dev,
                   std::int64_t c, std::int64_t h, std::int64_t w, float* out);

}  // namespace dlb::nn
