// Post-training quantization's calibration: the range [min, max] of the
// network input and of every layer's output (after its residual add and
// ReLU), measured by the reference forward pass (double precision, so the
// ranges do not depend on a backend or a summation order) over the first
// training images of the data set (never test images). The int8 rows derive
// each activation's u8 scale and zero point from its range (quant.h:
// affine_u8, the range widened to include 0).
//
// Kept in a small safetensors file next to the weights,
// <models_dir>/<network>.calibration.safetensors (build/calibrate writes
// it): one F32 [2] tensor {min, max} named "input" and one per layer named
// after the layer, metadata "network", "images" (how many) and "source"
// (the training set's path). Read back with the checks of the weights: a
// missing, extra, mis-shaped, non-finite or inverted (min > max) range, or a
// file of another network, throws dlb::Error naming the file and the tensor.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/nn/model/network.h"

namespace dlb::nn {

struct Range {
  float min = 0, max = 0;
};

struct Calibration {
  std::string network;
  std::int64_t images = 0;  // training images [0, images)
  std::string source;       // the training images' file
  Range input;
  std::vector<Range> outputs;  // per layer of the network, in order
};

// Checks the calibration against `net` as read_calibration does (throws
// dlb::Error naming `origin`).
void check_calibration(const Calibration& calibration, const Network& net, const std::string& origin);
Calibration read_calibration(const std::string& path, const Network& net);
void write_calibration(const std::string& path, const Calibration& calibration, const Network& net);

std::string calibration_path(std::string_view name);  // <models_dir>/<name>.calibration.safetensors
// The committed calibration of network(name), read once per process.
const Calibration& calibration(std::string_view name);

}  // namespace dlb::nn
