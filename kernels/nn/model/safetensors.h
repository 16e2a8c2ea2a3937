// A safetensors file (the format of Hugging Face's safetensors, what
// `safetensors.torch.save_file(model.state_dict())` writes): an 8-byte
// little-endian header length N, N bytes of JSON
//     {"__metadata__": {"key": "value", ...},
//      "<tensor name>": {"dtype": "F32", "shape": [16, 3, 3, 3], "data_offsets": [begin, end]}, ...}
// then the tensors' bytes, little-endian, row-major; offsets are relative to
// the end of the header. The header is parsed by nlohmann-json.
//
// Read whole and checked before anything is used: a file shorter than its
// header, a header that is not JSON or not this schema, an unknown dtype, a
// shape whose size is not its byte range, ranges that overlap, leave holes or
// run past the end of the file: each throws dlb::Error naming the file, the
// tensor and the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace dlb::nn {

enum class DType { f32, u8, i64 };

struct TensorInfo {
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::size_t begin = 0, end = 0;  // byte range in the data section
  std::int64_t elements() const;
};

class SafeTensors {
 public:
  // Throws dlb::Error (see above).
  static SafeTensors read(const std::string& path);
  // The same checks on bytes already in memory; `origin` names them in errors.
  static SafeTensors parse(std::vector<std::byte> bytes, const std::string& origin);

  const std::string& origin() const { return origin_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Metadata value, or throws naming the missing key.
  const std::string& metadata(const std::string& key) const;
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }

  // The tensor `name`, checked to be of this dtype and shape (throws naming
  // the tensor, what was expected and what the file has).
  std::vector<float> f32(const std::string& name, const std::vector<std::int64_t>& shape) const;
  std::vector<std::uint8_t> u8(const std::string& name, const std::vector<std::int64_t>& shape) const;
  std::vector<std::int64_t> i64(const std::string& name, const std::vector<std::int64_t>& shape) const;
  // The tensor's bytes as stored (throws naming a missing tensor).
  std::span<const std::byte> raw(const std::string& name) const;

 private:
  const TensorInfo& expect(const std::string& name, DType dtype, const std::vector<std::int64_t>& shape) const;
  std::string origin_;
  std::vector<std::byte> bytes_;
  std::size_t data_start_ = 0;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, TensorInfo> tensors_;
};

// An F32 tensor to write.
struct F32Tensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;  // row-major, as many as the shape says
};
// Writes a safetensors file that SafeTensors::read reads back: the tensors
// in the given order, contiguous; the header padded with spaces to a
// multiple of 8 bytes. Throws dlb::Error naming the file when it cannot be
// written, or a tensor whose values do not match its shape.
void write_safetensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                       const std::vector<F32Tensor>& tensors);

const char* dtype_name(DType dtype);
std::string shape_string(std::span<const std::int64_t> shape);

}  // namespace dlb::nn
