#include "kernels/nn/data/dataset.h"

#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "kernels/common/error.h"

namespace dlb::nn {
namespace {

// The whole content of a gzip or plain file (zlib reads both).
std::vector<std::uint8_t> read_maybe_gzip(const std::string& path) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), gzclose);
  if (!f) throw Error("'" + path + "': cannot open it");
  std::vector<std::uint8_t> out;
  std::uint8_t chunk[1 << 16];
  while (true) {
    const int got = gzread(f.get(), chunk, sizeof chunk);
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(f.get(), &code);
      throw Error("'" + path + "': corrupted gzip data (" + message + ")");
    }
    if (got == 0) break;
    out.insert(out.end(), chunk, chunk + got);
    if (out.size() > (std::size_t{1} << 32)) throw Error("'" + path + "': larger than 4 GiB, not a data set file");
  }
  // gzread returns 0 at a gzip stream that ends early; zlib says so here.
  int code = 0;
  const char* message = gzerror(f.get(), &code);
  if (code != Z_OK && code != Z_STREAM_END) throw Error("'" + path + "': truncated or corrupted gzip (" + message + ")");
  return out;
}

struct Idx {
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> bytes;  // the whole file; data from `offset`
  std::size_t offset = 0;
};

Idx parse_idx(const std::string& path, std::size_t want_dims) {
  Idx idx;
  idx.bytes = read_maybe_gzip(path);
  const auto& b = idx.bytes;
  const std::string where = "IDX file '" + path + "': ";
  if (b.size() < 4) throw Error(where + "truncated: " + std::to_string(b.size()) + " bytes, no magic number");
  if (b[0] != 0 || b[1] != 0) throw Error(where + "bad magic number (not an IDX file)");
  if (b[2] != 0x08) {
    char type[8];
    std::snprintf(type, sizeof type, "0x%02X", b[2]);
    throw Error(where + "element type " + type + ", expected 0x08 (unsigned byte)");
  }
  if (b[3] != want_dims) {
    throw Error(where + std::to_string(b[3]) + " dimensions, expected " + std::to_string(want_dims) +
                (want_dims == 3 ? " (images)" : " (labels)"));
  }
  idx.offset = 4 + 4 * want_dims;
  if (b.size() < idx.offset) throw Error(where + "truncated inside the dimensions");
  double total = 1;
  for (std::size_t d = 0; d < want_dims; ++d) {
    const std::size_t o = 4 + 4 * d;
    const std::uint32_t v = (std::uint32_t{b[o]} << 24) | (std::uint32_t{b[o + 1]} << 16) |
                            (std::uint32_t{b[o + 2]} << 8) | std::uint32_t{b[o + 3]};
    if (v == 0) throw Error(where + "dimension " + std::to_string(d) + " is 0");
    idx.dims.push_back(v);
    total *= v;
  }
  const double have = static_cast<double>(b.size() - idx.offset);
  if (have < total) {
    // %.0f: the product of three 32-bit dimensions can exceed any integer type.
    char need[64];
    std::snprintf(need, sizeof need, "%.0f", total);
    throw Error(where + "truncated: the dimensions need " + need + " bytes of data, the file has " +
                std::to_string(b.size() - idx.offset));
  }
  if (have > total) {
    throw Error(where + std::to_string(static_cast<long long>(have - total)) +
                " bytes after the data the dimensions describe");
  }
  return idx;
}

}  // namespace

Dataset read_idx(const std::string& images_path, const std::string& labels_path) {
  Idx images = parse_idx(images_path, 3);
  Idx labels = parse_idx(labels_path, 1);
  if (images.dims[0] != labels.dims[0]) {
    throw Error("IDX files '" + images_path + "' and '" + labels_path + "': " + std::to_string(images.dims[0]) +
                " images but " + std::to_string(labels.dims[0]) + " labels");
  }
  Dataset d;
  d.n = images.dims[0];
  d.c = 1;
  d.h = images.dims[1];
  d.w = images.dims[2];
  d.pixels.assign(images.bytes.begin() + static_cast<std::ptrdiff_t>(images.offset), images.bytes.end());
  d.labels.assign(labels.bytes.begin() + static_cast<std::ptrdiff_t>(labels.offset), labels.bytes.end());
  for (std::size_t i = 0; i < d.labels.size(); ++i) {
    if (d.labels[i] > 9)
      throw Error("IDX file '" + labels_path + "': label " + std::to_string(d.labels[i]) + " of item " +
                  std::to_string(i) + " is not a class 0..9");
  }
  d.source = images_path;
  return d;
}

Dataset read_cifar10(const std::vector<std::string>& paths) {
  constexpr std::size_t kImage = 3 * 32 * 32, kRecord = 1 + kImage;
  if (paths.empty()) throw Error("CIFAR-10: no files given");
  Dataset d;
  d.c = 3;
  d.h = d.w = 32;
  for (const auto& path : paths) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) throw Error("CIFAR-10 file '" + path + "': not a readable file");
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw Error("CIFAR-10 file '" + path + "': cannot open it");
    const auto size = static_cast<std::size_t>(in.tellg());
    if (size == 0 || size % kRecord != 0) {
      throw Error("CIFAR-10 file '" + path + "': " + std::to_string(size) + " bytes is not a whole number of " +
                  std::to_string(kRecord) + "-byte records (truncated or not a CIFAR-10 binary batch)");
    }
    std::vector<std::uint8_t> bytes(size);
    in.seekg(0);
    if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size)))
      throw Error("CIFAR-10 file '" + path + "': read failed");
    for (std::size_t r = 0; r < size / kRecord; ++r) {
      const std::uint8_t label = bytes[r * kRecord];
      if (label > 9) {
        throw Error("CIFAR-10 file '" + path + "': record " + std::to_string(r) + " has label " +
                    std::to_string(label) + ", not a class 0..9");
      }
      d.labels.push_back(label);
      d.pixels.insert(d.pixels.end(), bytes.begin() + static_cast<std::ptrdiff_t>(r * kRecord + 1),
                      bytes.begin() + static_cast<std::ptrdiff_t>((r + 1) * kRecord));
    }
  }
  d.n = static_cast<std::int64_t>(d.labels.size());
  d.source = paths.front();
  return d;
}

std::string fashion_mnist_dir() {
  if (const char* dir = std::getenv("DLB_FASHION_MNIST_DIR"); dir != nullptr && *dir != '\0') return dir;
  return "/usr/share/datasets/fashion-mnist";
}

namespace {
Dataset read_fashion_mnist(const std::string& prefix, const char* what) {
  const std::string dir = fashion_mnist_dir();
  const std::string images = dir + "/" + prefix + "-images-idx3-ubyte.gz",
                    labels = dir + "/" + prefix + "-labels-idx1-ubyte.gz";
  if (!std::filesystem::exists(images)) {
    throw Error(std::string("Fashion-MNIST ") + what + " not found at '" + images +
                "': install the package dataset-fashion-mnist (scripts/setup does) or set DLB_FASHION_MNIST_DIR");
  }
  return read_idx(images, labels);
}
}  // namespace

const Dataset& fashion_mnist_test() {
  static const Dataset data = read_fashion_mnist("t10k", "test set");
  return data;
}

const Dataset& fashion_mnist_train() {
  static const Dataset data = read_fashion_mnist("train", "training set");
  return data;
}

void network_input(const Dataset& data, std::int64_t first, std::int64_t count, float mean, float std_dev,
                   std::int64_t c, std::int64_t h, std::int64_t w, float* out) {
  DLB_REQUIRE(first >= 0 && count >= 0 && first <= data.n && count <= data.n - first,
              "images out of the data set's range");
  DLB_REQUIRE(h >= data.h && w >= data.w, "the network input is smaller than the images");
  DLB_REQUIRE(data.c == 1 || data.c == c, "channel counts that cannot be matched");
  const std::int64_t top = (h - data.h) / 2, left = (w - data.w) / 2;
  for (std::int64_t i = 0; i < count; ++i) {
    for (std::int64_t ch = 0; ch < c; ++ch) {
      const std::uint8_t* src = data.pixels.data() + ((first + i) * data.c + (data.c == 1 ? 0 : ch)) * data.h * data.w;
      float* dst = out + (i * c + ch) * h * w;
      for (std::int64_t y = 0; y < h; ++y) {
        for (std::int64_t x = 0; x < w; ++x) {
          const std::int64_t sy = y - top, sx = x - left;
          const bool inside = sy >= 0 && sy < data.h && sx >= 0 && sx < data.w;
          dst[y * w + x] = inside ? (static_cast<float>(src[sy * data.w + sx]) / 255.0f - mean) / std_dev : 0.0f;
        }
      }
    }
  }
}

}  // namespace dlb::nn
