#include "kernels/nn/model/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kernels/common/error.h"

namespace dlb::nn {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

// Headers above this are not weights files (the format's own limit is 100 MB).
constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;
constexpr int kMaxHeaderDepth = 8;

std::size_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::u8: return 1;
    case DType::i64: return 8;
  }
  return 0;
}

}  // namespace

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::u8: return "U8";
    case DType::i64: return "I64";
  }
  return "?";
}

std::string shape_string(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s.append(i ? ", " : "").append(std::to_string(shape[i]));
  return s + "]";
}

std::int64_t TensorInfo::elements() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

SafeTensors SafeTensors::read(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error("safetensors file '" + path + "': cannot open it (no such file)");
  if (!std::filesystem::is_regular_file(path, ec)) throw Error("safetensors file '" + path + "': not a regular file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error("safetensors file '" + path + "': cannot open it");
  const auto size = static_cast<std::size_t>(in.tellg());
  std::vector<std::byte> bytes(size);
  in.seekg(0);
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size)))
    throw Error("safetensors file '" + path + "': read failed");
  return parse(std::move(bytes), path);
}

SafeTensors SafeTensors::parse(std::vector<std::byte> bytes, const std::string& origin) {
  const std::string where = "safetensors file '" + origin + "': ";
  SafeTensors st;
  st.origin_ = origin;
  if (bytes.size() < 8)
    throw Error(where + "truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the 8-byte header length");
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > kMaxHeaderBytes)
    throw Error(where + "header length " + std::to_string(header_len) + " is implausible (over 100 MB)");
  if (header_len > bytes.size() - 8) {
    throw Error(where + "truncated: the header says it is " + std::to_string(header_len) + " bytes, the file has " +
                std::to_string(bytes.size() - 8) + " after the length");
  }
  st.data_start_ = 8 + static_cast<std::size_t>(header_len);
  const std::size_t data_bytes = bytes.size() - st.data_start_;

  // A safetensors header nests three levels (object, entry, shape); refuse
  // deep nesting before parsing, so that nothing downstream (nlohmann's
  // dump and destructor recurse) meets a file nested 100,000 levels deep.
  {
    int depth = 0, deepest = 0;
    bool in_string = false, escaped = false;
    for (std::size_t i = 8; i < st.data_start_; ++i) {
      const char ch = static_cast<char>(bytes[i]);
      if (in_string) {
        if (escaped) escaped = false;
        else if (ch == '\\') escaped = true;
        else if (ch == '"') in_string = false;
      } else if (ch == '"') {
        in_string = true;
      } else if (ch == '{' || ch == '[') {
        deepest = std::max(deepest, ++depth);
      } else if (ch == '}' || ch == ']') {
        --depth;
      }
    }
    if (deepest > kMaxHeaderDepth)
      throw Error(where + "the header nests " + std::to_string(deepest) + " levels deep, not a safetensors header");
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(reinterpret_cast<const char*>(bytes.data()) + 8,
                                   reinterpret_cast<const char*>(bytes.data()) + st.data_start_);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + "the header is not valid JSON (" + e.what() + ")");
  }
  if (!header.is_object()) throw Error(where + "the header is not a JSON object");

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw Error(where + "__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) throw Error(where + "__metadata__ value of '" + key + "' is not a string");
        st.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string at = where + "tensor '" + name + "': ";
    if (!entry.is_object()) throw Error(at + "entry is not an object");
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!entry.contains(field)) throw Error(at + "no '" + field + "'");
    TensorInfo info;
    const auto& dtype = entry["dtype"];
    if (!dtype.is_string()) throw Error(at + "dtype is not a string");
    const auto dtype_text = dtype.get<std::string>();
    if (dtype_text == "F32") info.dtype = DType::f32;
    else if (dtype_text == "U8") info.dtype = DType::u8;
    else if (dtype_text == "I64") info.dtype = DType::i64;
    else throw Error(at + "dtype '" + dtype_text + "' is not supported (F32, U8, I64)");
    const auto& shape = entry["shape"];
    if (!shape.is_array()) throw Error(at + "shape is not an array");
    double elements = 1;
    for (const auto& d : shape) {
      if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
        throw Error(at + "shape " + shape.dump() + " has an entry that is not a non-negative integer");
      info.shape.push_back(d.get<std::int64_t>());
      elements *= static_cast<double>(info.shape.back());
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      throw Error(at + "data_offsets " + offsets.dump() + " is not two non-negative integers");
    const auto begin = offsets[0].get<std::uint64_t>(), end = offsets[1].get<std::uint64_t>();
    if (begin > end) throw Error(at + "data_offsets " + offsets.dump() + " end before they begin");
    if (end > data_bytes) {
      throw Error(at + "data_offsets " + offsets.dump() + " run past the end of the file (" +
                  std::to_string(data_bytes) + " data bytes): truncated or a header that lies");
    }
    const double expected = elements * static_cast<double>(dtype_bytes(info.dtype));
    if (expected != static_cast<double>(end - begin)) {
      throw Error(at + "shape " + shape_string(info.shape) + " of " + dtype_text + " is " +
                  std::to_string(static_cast<long long>(expected)) + " bytes, data_offsets give " +
                  std::to_string(end - begin));
    }
    info.begin = static_cast<std::size_t>(begin);
    info.end = static_cast<std::size_t>(end);
    st.tensors_.emplace(name, std::move(info));
  }

  // The ranges must tile the data section: no overlap, no hole, nothing after.
  std::vector<std::pair<const std::string*, const TensorInfo*>> order;
  for (const auto& [name, info] : st.tensors_) order.emplace_back(&name, &info);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second->begin != b.second->begin ? a.second->begin < b.second->begin : a.second->end < b.second->end;
  });
  std::size_t covered = 0;
  for (const auto& [name, info] : order) {
    if (info->begin < covered) throw Error(where + "tensor '" + *name + "' overlaps the tensor before it");
    if (info->begin > covered)
      throw Error(where + "a hole of " + std::to_string(info->begin - covered) + " bytes before tensor '" + *name + "'");
    covered = info->end;
  }
  if (covered != data_bytes)
    throw Error(where + std::to_string(data_bytes - covered) + " bytes after the last tensor belong to none");
  st.bytes_ = std::move(bytes);
  return st;
}

const std::string& SafeTensors::metadata(const std::string& key) const {
  const auto it = metadata_.find(key);
  if (it == metadata_.end()) throw Error("safetensors file '" + origin_ + "': no metadata '" + key + "'");
  return it->second;
}

const TensorInfo& SafeTensors::expect(const std::string& name, DType dtype,
                                      const std::vector<std::int64_t>& shape) const {
  const std::string at = "safetensors file '" + origin_ + "': tensor '" + name + "': ";
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error(at + "missing");
  if (it->second.dtype != dtype)
    throw Error(at + "dtype " + dtype_name(it->second.dtype) + ", expected " + dtype_name(dtype));
  if (it->second.shape != shape)
    throw Error(at + "shape " + shape_string(it->second.shape) + ", expected " + shape_string(shape));
  return it->second;
}

namespace {
template <class T>
std::vector<T> copy_out(const std::vector<std::byte>& bytes, std::size_t start, const TensorInfo& info) {
  std::vector<T> out(static_cast<std::size_t>(info.elements()));
  if (!out.empty()) std::memcpy(out.data(), bytes.data() + start + info.begin, info.end - info.begin);
  return out;
}
}  // namespace

std::vector<float> SafeTensors::f32(const std::string& name, const std::vector<std::int64_t>& shape) const {
  return copy_out<float>(bytes_, data_start_, expect(name, DType::f32, shape));
}
std::vector<std::uint8_t> SafeTensors::u8(const std::string& name, const std::vector<std::int64_t>& shape) const {
  return copy_out<std::uint8_t>(bytes_, data_start_, expect(name, DType::u8, shape));
}
std::vector<std::int64_t> SafeTensors::i64(const std::string& name, const std::vector<std::int64_t>& shape) const {
  return copy_out<std::int64_t>(bytes_, data_start_, expect(name, DType::i64, shape));
}

std::span<const std::byte> SafeTensors::raw(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error("safetensors file '" + origin_ + "': tensor '" + name + "': missing");
  return std::span<const std::byte>(bytes_).subspan(data_start_ + it->second.begin, it->second.end - it->second.begin);
}

void write_safetensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                       const std::vector<F32Tensor>& tensors) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::size_t offset = 0;
  for (const auto& t : tensors) {
    std::int64_t n = 1;
    for (auto d : t.shape) n *= d;
    if (n != static_cast<std::int64_t>(t.values.size()))
      throw Error("writing '" + path + "': tensor " + t.name + " has " + std::to_string(t.values.size()) +
                  " values for shape " + shape_string(t.shape));
    const std::size_t bytes = t.values.size() * sizeof(float);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::uint64_t length = text.size();
  out.write(reinterpret_cast<const char*>(&length), sizeof length);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : tensors)
    out.write(reinterpret_cast<const char*>(t.values.data()), static_cast<std::streamsize>(t.values.size() * sizeof(float)));
  out.close();
  if (!out) throw Error("writing '" + path + "': cannot write the file");
}

}  // namespace dlb::nn
