// --net=<network>[_train]/batch:B (bench/descriptor.cpp).
#include "fuzz/fuzz_descriptor.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dlb::bench;
  return dlb::fuzz::check_descriptor(data, size, parse_net_descriptor, [](const NetShape& s) {
    bool known = false;
    for (const auto name : kDescriptorNetworks) known = known || s.base() == name;
    return known && s.batch >= 1 && s.batch <= (s.train() ? kMaxTrainBatch : kMaxInferenceBatch);
  });
}
