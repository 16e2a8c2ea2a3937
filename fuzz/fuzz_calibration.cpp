// The calibration reader (kernels/nn/model/calibration.cpp, on the safetensors
// reader) on arbitrary bytes, for a three-layer network (conv1 with ReLU, a
// max pool, fc without): either a calibration whose every range is finite
// and ordered (and not below 0 after the ReLU), or dlb::Error.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_common.h"
#include "kernels/common/error.h"
#include "kernels/nn/model/calibration.h"

namespace {

dlb::nn::Network small_network() {
  dlb::nn::Network net;
  net.name = "fuzz_net";
  dlb::nn::Layer conv;
  conv.name = "conv1";
  conv.kind = dlb::nn::LayerKind::conv;
  conv.relu = true;
  dlb::nn::Layer pool;
  pool.name = "pool";
  pool.kind = dlb::nn::LayerKind::max_pool;
  pool.input = 0;
  dlb::nn::Layer fc;
  fc.name = "fc";
  fc.kind = dlb::nn::LayerKind::fc;
  fc.input = 1;
  net.layers = {conv, pool, fc};
  return net;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const dlb::nn::Network net = small_network();
  static const dlb::fuzz::Scratch file("calibration");
  dlb::fuzz::write_file(file.path(), data, size);
  try {
    const auto c = dlb::nn::read_calibration(file.path(), net);
    if (c.outputs.size() != net.layers.size()) __builtin_trap();
    for (const auto& r : c.outputs)
      if (!std::isfinite(r.min) || !std::isfinite(r.max) || !(r.min <= r.max)) __builtin_trap();
    if (c.outputs[0].min < 0 || !(c.input.min <= c.input.max)) __builtin_trap();
  } catch (const dlb::Error&) {
  }
  return 0;
}
