// calibrate: measures a network's activation ranges for post-training int8
// quantization (kernels/nn/model/calibration.h) with the reference forward pass
// over the first training images of Fashion-MNIST, and writes the
// calibration file the int8 rows read.
//
//   build/calibrate --network=resnet20|mnist_cnn|mnist_lenet [--images=500] [--out=FILE]
//
// --out defaults to the committed file, <models_dir>/<network>.calibration.safetensors.
// Exit 0 on success, 2 on bad arguments or bad input files (with a message).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "bench/cli.h"
#include "kernels/common/error.h"
#include "kernels/nn/model/calibration.h"
#include "kernels/nn/data/dataset.h"
#include "reference/nn/infer/nn.h"

namespace {

constexpr const char* kUsage =
    "usage: calibrate --network=resnet20|mnist_cnn|mnist_lenet [--images=N (500)] [--out=FILE]";

// The float range that contains [lo, hi].
dlb::nn::Range outward(double lo, double hi) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  float a = static_cast<float>(lo), b = static_cast<float>(hi);
  if (a > lo) a = std::nextafter(a, -inf);
  if (b < hi) b = std::nextafter(b, inf);
  return {a, b};
}

int run(int argc, char** argv) {
  std::string network, out;
  long long images = 500;
  if (!dlb::cli::parse_flags(argc, argv,
                             {{"--network", [&](std::string_view v) { network = v; }},
                              {"--images", [&](std::string_view v) { images = dlb::cli::parse_count("--images", v); }},
                              {"--out", [&](std::string_view v) { out = v; }}},
                             kUsage))
    return 0;
  if (network.empty()) throw dlb::Error(std::string("--network is required\n") + kUsage);
  const dlb::nn::Network& net = dlb::nn::network(network);
  const auto& data = dlb::nn::fashion_mnist_train();
  if (images < 1 || images > data.n)
    throw dlb::Error("--images=" + std::to_string(images) + ": the training set has " + std::to_string(data.n));
  if (out.empty()) out = dlb::nn::calibration_path(network);

  constexpr double inf = std::numeric_limits<double>::infinity();
  double in_lo = inf, in_hi = -inf;
  std::vector<std::pair<double, double>> ranges(net.layers.size(), {inf, -inf});
  constexpr long long kChunk = 100;
  for (long long first = 0; first < images; first += kChunk) {
    const long long count = std::min(kChunk, images - first);
    std::vector<float> x(static_cast<std::size_t>(count * net.in_size()));
    dlb::nn::network_input(data, first, count, net.input_mean, net.input_std, net.c, net.h, net.w, x.data());
    const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
    in_lo = std::min<double>(in_lo, *lo);
    in_hi = std::max<double>(in_hi, *hi);
    const auto chunk = dlb::ref::output_ranges(net, x, count);
    for (std::size_t i = 0; i < ranges.size(); ++i)
      ranges[i] = {std::min(ranges[i].first, chunk[i].first), std::max(ranges[i].second, chunk[i].second)};
  }
  // The file's name, not where this machine keeps it.
  const std::string source = std::filesystem::path(data.source).filename().string();
  dlb::nn::Calibration c{net.name, images, source, outward(in_lo, in_hi), {}};
  for (const auto& [lo, hi] : ranges) c.outputs.push_back(outward(lo, hi));
  dlb::nn::write_calibration(out, c, net);
  std::printf("%s: ranges of the input and %zu layers over training images [0, %lld) of %s -> %s\n",
              net.name.c_str(), net.layers.size(), images, data.source.c_str(), out.c_str());
  std::printf("  %-24s [%g, %g]\n", "input", c.input.min, c.input.max);
  for (std::size_t i = 0; i < net.layers.size(); ++i)
    std::printf("  %-24s [%g, %g]\n", net.layers[i].name.c_str(), c.outputs[i].min, c.outputs[i].max);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dlb::cli::main_reporting_errors("calibrate", run, argc, argv); }
