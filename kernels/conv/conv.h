// conv: 2-D forward convolution, fp32, no bias, no activation:
//   y[n][k][oh][ow] = sum_{c,r,s} x[n][c][oh*stride + r - pad][ow*stride + s - pad] * w[k][c][r][s]
// with zero padding. NCHW input, OIHW weights, NCHW output on both sides of
// every variant; a variant that computes in another layout converts inside
// the timed call (said per row below), except cpu_winograd_nhwc, cpu_winograd_s2_nhwc and the one
// named _blocked, whose timed calls stay in their layout (NHWC, oneDNN's) as
// a network keeping that layout between layers runs them (they are
// validated converted to NCHW).
// Weights are repacked in prepare, outside the timed call, where a variant
// wants them in another order: a framework does that once per model.
//
// Variants (the table in conv.cpp):
//   cpu_direct              own direct convolution: input padded and split into stride phases per
//                           image, so every filter tap is one vector load; 8 output channels x 3
//                           vectors of 16 positions in registers; OpenMP over images and channel
//                           blocks; weights repacked in prepare
//   cpu_im2col              own im2col per image, then Eigen GEMM W[k, c*r*s] * col[c*r*s, oh*ow]
//                           (OpenMP over images, or Eigen's own threads at batch 1)
//   cpu_winograd            own Winograd F(2x2, 3x3), 3x3 stride 1 only (any pad): the batch's tiles
//                           in blocks of 96, input transform from NCHW x, 16 GEMMs in registers and
//                           output transform into NCHW y per block in cache; weight transform
//                           G g G^T in prepare
//   cpu_winograd_nhwc       own Winograd F(4x4, 3x3) on NHWC (conv_winograd_nhwc.h), 3x3 stride 1
//                           with c and k multiples of 16: 8 tiles at a time, input transform, 36
//                           GEMMs in registers, output transform in cache; x transposed to NHWC in
//                           prepare, the timed call the kernel alone (ConvReport::timed_call)
//   cpu_winograd_s2_nhwc    own Winograd for 3x3 stride 2 on NHWC (conv_winograd_s2_nhwc.h): the
//                           four parity phases' F(4x4, 2x2) summed in one 5x5 domain, 81 products
//                           per tile and channel pair; c and k multiples of 16; layouts and timed
//                           call as cpu_winograd_nhwc
//   cpu_onednn_direct       oneDNN convolution_direct; the layouts it prefers (format_tag::any), the
//                           NCHW -> blocked and blocked -> NCHW reorders inside the timed call
//   cpu_onednn_winograd     oneDNN convolution_winograd, same layout handling; skipped with
//                           oneDNN's reason where it has no implementation for the shape or CPU
//   cpu_onednn_auto         oneDNN convolution_auto (oneDNN picks the algorithm), same layout handling
//   cpu_onednn_auto_blocked the same convolution as a framework keeping oneDNN's layout between layers
//                           runs it: x reordered once in prepare, the timed call is the convolution
//                           alone with its output left blocked (validation converts it to NCHW y)
//   gpu_cudnn_<algorithm>   cudnnConvolutionForward with one fixed algorithm (implicit_gemm,
//                           implicit_precomp_gemm, gemm, direct, fft, fft_tiling, winograd,
//                           winograd_nonfused); strict fp32 (CUDNN_FMA_MATH); skipped with cuDNN's
//                           status where the algorithm does not support the shape
//   gpu_cudnn_heuristic     the top choice of cudnnGetConvolutionForwardAlgorithm_v7
//   gpu_cudnn_find          the winner of cudnnFindConvolutionForwardAlgorithm (what
//                           torch.backends.cudnn.benchmark = True does); the search is in prepare
//   gpu_im2col_cublas       own im2col kernel for the whole batch, then one strided-batched cublasSgemm
//                           per call (strict fp32)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/common/variant.h"

namespace dlb {

// A convolution problem: the descriptor of the benchmark name
// (n c h w k r s stride pad), square stride and padding, no dilation, no groups.
struct ConvShape {
  std::int64_t n = 1;       // batch
  std::int64_t c = 1;       // input channels
  std::int64_t h = 1;       // input height
  std::int64_t w = 1;       // input width
  std::int64_t k = 1;       // output channels
  std::int64_t r = 1;       // filter height
  std::int64_t s = 1;       // filter width
  std::int64_t stride = 1;  // both directions
  std::int64_t pad = 0;     // zeros on every side

  std::int64_t oh() const { return (h + 2 * pad - r) / stride + 1; }
  std::int64_t ow() const { return (w + 2 * pad - s) / stride + 1; }
  std::int64_t x_size() const { return n * c * h * w; }
  std::int64_t w_size() const { return k * c * r * s; }
  std::int64_t y_size() const { return n * k * oh() * ow(); }
  // The direct count, 2 * n*k*oh*ow*c*r*s, for every algorithm.
  double flops() const {
    return 2.0 * static_cast<double>(n * k * oh() * ow()) * static_cast<double>(c * r * s);
  }
  // "n64c16h32w32k16r3s3stride1pad1": the --conv descriptor of this shape.
  std::string descriptor() const {
    std::string d;
    for (const auto& [key, value] : {std::pair<const char*, std::int64_t>{"n", n}, {"c", c}, {"h", h}, {"w", w},
                                     {"k", k}, {"r", r}, {"s", s}, {"stride", stride}, {"pad", pad}})
      d.append(key).append(std::to_string(value));
    return d;
  }
};

// Throws dlb::Error naming the first problem: a size that is not positive,
// a negative pad, a filter larger than the padded input (no output), or a
// tensor of 2^31 elements or more (cuDNN's and oneDNN's int dimensions).
void validate_conv_shape(const ConvShape& shape);

// Parses a descriptor in the style of oneDNN's benchdnn,
// "n64c16h32w32k16r3s3stride1pad1": fields n c h w k r s stride pad, each a
// name followed by a decimal integer, in any order, each at most once.
// Required: n, c, h, k, r. Defaults: w = h, s = r, stride = 1, pad = 0.
// Throws dlb::Error naming what is wrong (unknown or repeated field, missing
// number, missing field, a size that is not positive, no output).
ConvShape parse_conv_descriptor(std::string_view text);
// A comma-separated list of descriptors.
std::vector<ConvShape> parse_conv_descriptors(std::string_view text);

// What prepare found out, for the benchmark's counters and label: the
// algorithm a library picked, its scratch memory, what choosing it cost.
// Fields prepare does not know stay as they are.
struct ConvReport {
  std::string implementation;   // "jit:avx512_core", "CUDNN_CONVOLUTION_FWD_ALGO_FFT"...
  double workspace_bytes = -1;  // GPU scratch memory one call uses (cuDNN workspace, im2col buffer)
  double search_seconds = -1;   // one-off cost of choosing the algorithm (cudnnFind's search)
  std::string search_log;       // the search's candidates: each one's median or why it was not timed
  // Set by the _blocked variants: what to time instead of the prepared call,
  // which is the same computation plus converting the output into NCHW y
  // (what validation runs and checks).
  Run timed_call;
};

struct ConvArgs {
  ConvShape shape;
  const float* x = nullptr;  // [n, c, h, w]
  const float* w = nullptr;  // [k, c, r, s]
  float* y = nullptr;        // [n, k, oh, ow], every element written
  ConvReport* report = nullptr;  // may be null
};

using ConvVariant = Variant<ConvArgs>;
VariantTable<ConvArgs> conv_variants();

// Shapes of the F(2x2, 3x3) Winograd variants: 3x3 filters at stride 1.
bool conv_is_3x3_stride1(const ConvArgs& args);

Run prepare_conv_direct(const ConvArgs& args, const Exec& exec);
// cpu_direct for a caller whose weights change between calls (the training
// step's cpu_own, kernels/nn/train/train.cpp): each call repacks the weights (k c r
// s floats, small beside the convolution) and reads x, w and y from *args as
// they are then; args must outlive the Run and keep the shape it was made for.
Run prepare_conv_direct_live(const ConvArgs* args, const Exec& exec);
Run prepare_conv_im2col(const ConvArgs& args, const Exec& exec);
Run prepare_conv_winograd(const ConvArgs& args, const Exec& exec);
// Shapes of cpu_winograd_nhwc: 3x3 at stride 1, c and k multiples of 16.
bool conv_winograd_nhwc_accepts(const ConvArgs& args);
Run prepare_conv_winograd_nhwc(const ConvArgs& args, const Exec& exec);
// Shapes of cpu_winograd_s2_nhwc: 3x3 at stride 2, c and k multiples of 16.
bool conv_winograd_s2_nhwc_accepts(const ConvArgs& args);
Run prepare_conv_winograd_s2_nhwc(const ConvArgs& args, const Exec& exec);
Run prepare_conv_onednn_direct(const ConvArgs& args, const Exec& exec);
Run prepare_conv_onednn_winograd(const ConvArgs& args, const Exec& exec);
Run prepare_conv_onednn_auto(const ConvArgs& args, const Exec& exec);
Run prepare_conv_onednn_auto_blocked(const ConvArgs& args, const Exec& exec);

// The fixed-algorithm cuDNN variants: conv_cudnn.h.
Run prepare_conv_cudnn_heuristic(const ConvArgs& args, const Exec& exec);
Run prepare_conv_cudnn_find(const ConvArgs& args, const Exec& exec);
Run prepare_conv_im2col_cublas(const ConvArgs& args, const Exec& exec);

}  // namespace dlb
