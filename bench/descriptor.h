// Descriptors: one problem of a family as one word of text, for bench's
// flags (--softmax=rows:128/cols:1024, --gemm=m:64/n:10/k:512, ...) and the
// lines of a batch file (--shapes=FILE: "gemm m:64/n:10/k:512"). Every
// family but conv writes "name:value/name:value", the field names and
// values of its case names; conv keeps benchdnn's "n64c16h32w32k16r3s3..."
// (kernels/conv/conv.h). One parser for all of them, so that every family
// names a bad field, a missing or repeated one and a value out of its
// limits the same way. No library, no harness: the fuzz targets (fuzz/)
// compile this file with kernels/conv/conv_shape.cpp alone.
#pragma once

#include <compare>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/conv/conv.h"

namespace dlb::bench {

// One field of a "name:value/name:value" descriptor: a decimal integer in
// [1, max], with K, M or G (2^10, 2^20, 2^30) after it where size_suffix.
struct DescriptorField {
  std::string_view name;
  std::int64_t max;
  std::string_view max_why;  // what the limit is: "cuBLAS's int dimensions"
  bool size_suffix = false;
};

// The values of `text`'s fields in the order of `fields`: every field once,
// in any order. Throws dlb::Error "<family> descriptor '<text>': <problem>"
// naming the field (unknown, missing, given twice, no value, not an
// integer, 0, past its limit) and ending with `example`.
std::vector<std::int64_t> parse_descriptor_fields(std::string_view family, std::string_view text,
                                                  std::span<const DescriptorField> fields, std::string_view example);

// A value with its size suffix: 4096 as "4K", 3<<20 as "3M"; plain otherwise.
std::string size_text(std::int64_t bytes);

// The limits. Dimensions the CUDA kernels, cuDNN and cuBLAS take as int.
inline constexpr std::int64_t kMaxIntDimension = 2147483647;
// Copies: 1 TiB (the host memory check, take_user_shapes, is what bites).
inline constexpr std::int64_t kMaxCopyBytes = std::int64_t{1} << 40;
// Networks: the images a batch is taken from (Fashion-MNIST's test set for
// inference, its training set for training steps).
inline constexpr std::int64_t kMaxInferenceBatch = 10000;
inline constexpr std::int64_t kMaxTrainBatch = 60000;

// softmax/<variant>/rows:R/cols:C and log_softmax/...: "rows:R/cols:C".
struct SoftmaxShape {
  std::int64_t rows = 1, cols = 1;
  std::string descriptor() const;
  // What a case holds on the host at least: x, y (fp32) and the double
  // reference.
  double host_bytes() const { return 16.0 * static_cast<double>(rows) * static_cast<double>(cols); }
  auto operator<=>(const SoftmaxShape&) const = default;
};
SoftmaxShape parse_softmax_descriptor(std::string_view text);

// gemm/<variant>/m:M/n:N/k:K: "m:M/n:N/k:K".
struct GemmShape {
  std::int64_t m = 1, n = 1, k = 1;
  std::string descriptor() const;
  // fp32 A, B and C.
  double host_bytes() const {
    const double m_ = static_cast<double>(m), n_ = static_cast<double>(n), k_ = static_cast<double>(k);
    return 4.0 * (m_ * k_ + k_ * n_ + m_ * n_);
  }
  auto operator<=>(const GemmShape&) const = default;
};
GemmShape parse_gemm_descriptor(std::string_view text);

// daxpy/<variant>/n:N: "n:N" (K, M, G accepted: n:1M).
struct DaxpyShape {
  std::int64_t n = 1;
  std::string descriptor() const;
  // x, y and the reference y (double).
  double host_bytes() const { return 24.0 * static_cast<double>(n); }
  auto operator<=>(const DaxpyShape&) const = default;
};
DaxpyShape parse_daxpy_descriptor(std::string_view text);

// copy/<variant>/bytes:B: "bytes:B" (K, M, G accepted: bytes:64M).
struct CopyShape {
  std::int64_t bytes = 1;
  std::string descriptor() const;
  // The pipeline cases' host input and output.
  double host_bytes() const { return 2.0 * static_cast<double>(bytes); }
  auto operator<=>(const CopyShape&) const = default;
};
CopyShape parse_copy_descriptor(std::string_view text);

// <network>/<backend>/batch:B (inference) or <network>_train/<impl>/batch:B
// (a training step): "resnet20/batch:64", "resnet20_train/batch:64".
struct NetShape {
  std::string network;  // as in the case names: "resnet20", "mnist_cnn_train"
  std::int64_t batch = 1;
  std::string descriptor() const;
  bool train() const { return network.ends_with("_train"); }
  // The network without "_train".
  std::string_view base() const {
    return std::string_view(network).substr(0, network.size() - (train() ? 6 : 0));
  }
  auto operator<=>(const NetShape&) const = default;
};
NetShape parse_net_descriptor(std::string_view text);
// The networks a --net descriptor names (nn::network_names(); test_descriptor
// checks the two agree); each also takes "_train" after it.
inline constexpr std::string_view kDescriptorNetworks[] = {"resnet20", "mnist_cnn", "mnist_lenet"};

// Every problem the user gave, by family; each once, in the order given.
struct Descriptors {
  std::vector<ConvShape> conv;
  std::vector<SoftmaxShape> softmax;
  std::vector<GemmShape> gemm;
  std::vector<DaxpyShape> daxpy;
  std::vector<CopyShape> copy;
  std::vector<NetShape> net;
  bool empty() const;
  std::size_t size() const;
};

// The families a descriptor can name: the flag --<family>=... and the
// first word of a batch-file line.
inline constexpr std::string_view kDescriptorFamilies[] = {"conv", "softmax", "gemm", "daxpy", "copy", "net"};

// Parses `text` as a descriptor of `family` (conv: a comma-separated list,
// as --conv takes) and adds what is not in `into` yet. Throws dlb::Error for
// an unknown family (naming the known ones) or a bad descriptor.
void add_descriptor(std::string_view family, std::string_view text, Descriptors& into);

// A batch file: one "<family> <descriptor>" a line; '#' starts a comment,
// blank lines are skipped. Every line is parsed: a dlb::Error counts the
// bad lines and lists each as "<origin>:<line>: <problem>" (the first
// thousand); a file with no descriptor at all is an error too.
Descriptors parse_shapes_file(std::string_view text, std::string_view origin);

}  // namespace dlb::bench
