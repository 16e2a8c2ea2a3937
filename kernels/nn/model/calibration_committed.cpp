// The committed calibrations (calibration.h: calibration_path, calibration),
// apart from calibration.cpp so that the file format's code (what
// fuzz/fuzz_calibration links) does not need the network loader.
#include "kernels/nn/model/cache.h"
#include "kernels/nn/model/calibration.h"

namespace dlb::nn {

std::string calibration_path(std::string_view name) {
  return models_dir() + "/" + std::string(name) + ".calibration.safetensors";
}

const Calibration& calibration(std::string_view name) {
  return load_once<Calibration>(name, [name] { return read_calibration(calibration_path(name), network(name)); });
}

}  // namespace dlb::nn
