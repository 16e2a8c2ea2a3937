#include "kernels/nn/model/calibration.h"

#include <cmath>

#include "kernels/common/error.h"
#include "kernels/nn/model/safetensors.h"

namespace dlb::nn {
namespace {

void check_range(const Range& r, const std::string& where, const std::string& tensor) {
  if (!std::isfinite(r.min) || !std::isfinite(r.max))
    throw Error(where + "range of " + tensor + " is not finite (" + std::to_string(r.min) + ", " +
                std::to_string(r.max) + ")");
  if (r.min > r.max)
    throw Error(where + "range of " + tensor + " has min " + std::to_string(r.min) + " above max " +
                std::to_string(r.max));
}

}  // namespace

void check_calibration(const Calibration& c, const Network& net, const std::string& origin) {
  const std::string where = "calibration '" + origin + "': ";
  if (c.network != net.name) throw Error(where + "made for network '" + c.network + "', not " + net.name);
  if (c.images < 1) throw Error(where + "made on " + std::to_string(c.images) + " images");
  if (c.outputs.size() != net.layers.size())
    throw Error(where + std::to_string(c.outputs.size()) + " layer ranges for " + std::to_string(net.layers.size()) +
                " layers");
  check_range(c.input, where, "input");
  for (std::size_t i = 0; i < c.outputs.size(); ++i) {
    check_range(c.outputs[i], where, net.layers[i].name);
    // A ReLU's output is never negative: a range that says otherwise was
    // not measured on this network.
    if (net.layers[i].relu && c.outputs[i].min < 0)
      throw Error(where + "range of " + net.layers[i].name + " goes below 0 (" + std::to_string(c.outputs[i].min) +
                  "), after a ReLU");
  }
}

Calibration read_calibration(const std::string& path, const Network& net) {
  const SafeTensors st = SafeTensors::read(path);
  Calibration c;
  c.network = st.metadata("network");
  const std::string& images = st.metadata("images");
  try {
    std::size_t used = 0;
    c.images = std::stoll(images, &used);
    if (used != images.size()) throw std::invalid_argument(images);
  } catch (const std::exception&) {
    throw Error("calibration '" + path + "': metadata images is not an integer: '" + images + "'");
  }
  c.source = st.metadata("source");
  if (c.network != net.name)  // before the tensors: another network's names would be reported as missing
    throw Error("calibration '" + path + "': made for network '" + c.network + "', not " + net.name);
  const auto range = [&](const std::string& name) {
    const auto v = st.f32(name, {2});
    return Range{v[0], v[1]};
  };
  c.input = range("input");
  for (const auto& l : net.layers) c.outputs.push_back(range(l.name));
  if (st.tensors().size() != net.layers.size() + 1) {
    for (const auto& [name, info] : st.tensors()) {
      bool known = name == "input";
      for (const auto& l : net.layers) known = known || l.name == name;
      if (!known)
        throw Error("calibration '" + path + "': unexpected tensor '" + name + "' (no such layer in " + net.name + ")");
    }
  }
  check_calibration(c, net, path);
  return c;
}

void write_calibration(const std::string& path, const Calibration& c, const Network& net) {
  std::vector<F32Tensor> tensors{{"input", {2}, {c.input.min, c.input.max}}};
  check_calibration(c, net, path);
  for (std::size_t i = 0; i < c.outputs.size(); ++i)
    tensors.push_back({net.layers[i].name, {2}, {c.outputs[i].min, c.outputs[i].max}});
  write_safetensors(path, {{"network", c.network}, {"images", std::to_string(c.images)}, {"source", c.source}},
                    tensors);
}

}  // namespace dlb::nn
