// The safetensors reader (kernels/nn/model/safetensors.cpp) on arbitrary bytes:
// either a file whose every tensor can be read back within its bytes, or
// dlb::Error.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/nn/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>(data[i]);
  try {
    const auto file = dlb::nn::SafeTensors::parse(std::move(bytes), "fuzz input");
    for (const auto& [name, info] : file.tensors()) {
      const auto raw = file.raw(name);
      if (raw.size() != info.end - info.begin) __builtin_trap();
      switch (info.dtype) {
        case dlb::nn::DType::f32: (void)file.f32(name, info.shape); break;
        case dlb::nn::DType::u8: (void)file.u8(name, info.shape); break;
        case dlb::nn::DType::i64: (void)file.i64(name, info.shape); break;
      }
    }
    for (const auto& [key, value] : file.metadata()) (void)file.metadata(key);
  } catch (const dlb::Error&) {
  }
  return 0;
}
