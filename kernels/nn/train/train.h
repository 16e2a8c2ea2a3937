// A training step of a network (issue 35): forward keeping what backward
// needs, the loss (cross-entropy: the mean over the batch of the negative
// log-probability of each image's label, as PyTorch's cross_entropy, or its
// nll_loss on a log-softmax output), backward through every layer, and an
// SGD-with-momentum update, in fp32 on the CPU.
//
// Convolutions as im2col + GEMM (forward Y = W col + b; backward
// dW += dY col^T, dcol = W^T dY then col2im), each GEMM on a chunk of
// images whose patches sit side by side (about 1,024 columns), fc as GEMMs
// on the batch
// (Y = X W^T + b; dW = dY^T X, dX = dY W), the GEMMs by Eigen or by
// oneDNN's sgemm (Gemm; benchmark rows cpu_eigen, cpu_onednn_sgemm), ReLU
// masks from the kept outputs (gradient where the output is > 0, as
// PyTorch's threshold_backward), max pooling routing each output's
// gradient to the first maximum of its window (kept as an index), global
// average pooling spreading it evenly. The step's own buffers are made
// once by the constructor; Eigen's GEMMs allocate their packing blocks on
// each call (the benchmark's allocated_bytes_per_step counts them).
//
// Semantics: layers in execution order, each reading an earlier one's
// output (or the input): conv (+bias) (+batch-norm) (+residual) (+ReLU),
// max_pool, global_avg_pool, fc (+ReLU) and a final log_softmax (or none:
// then the loss applies log-softmax to the last layer's output, as
// cross_entropy does). Dropout is not part of the network description: the
// step is deterministic, with dropout off (PyTorch's model.eval() for
// mnist_cnn, whose only training-mode difference is its two dropouts).
//
// Batch-norm in training mode, as nn.BatchNorm2d under model.train()
// (resnet20): the conv's output z is normalized with the batch's
// statistics, mean and biased variance over (N, H, W) per channel,
// y = gamma (z - mean) / sqrt(var + eps) + beta, computed as
// y = z * scale + shift (scale = gamma / sqrt(var + eps), shift = beta -
// mean * scale, as PyTorch's CPU kernel); the per-channel sums in double.
// Backward: dbeta = sum dy, dgamma = sum dy xhat, dz = scale (dy - mean(dy)
// - xhat mean(dy xhat)). Each forward updates the running statistics as
// PyTorch does: running = (1 - momentum) running + momentum batch, with the
// unbiased variance (M / (M - 1), M = N H W) for running_var. The step
// trains the unfolded parameters (Layer::raw: conv weight, batch-norm
// weight = gamma and bias = beta), not the folded inference ones.
// Residual joins (Layer::residual): the other layer's output is added
// after batch-norm, before the ReLU; the gradient there flows to both.
//
// SGD with momentum as torch.optim.SGD (dampening 0, not Nesterov):
//     v = momentum * v + (g + weight_decay * p);  p = p - lr * v
// with v starting at zero (PyTorch's first step sets v = g: the same).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/nn/model/network.h"
#include "kernels/nn/train/train_params.h"

namespace dlb::nn {

// The bound on the fp32 step's gradients (issue 35's "within a bound
// derived like the forward's"). Every gradient element is a sum of products
// along chains of fp32 operations: the forward pass's reductions (conv
// c*r*r, fc inputs, the softmax's classes), the backward pass's input
// gradients (conv k*r*r/stride^2, fc k) and the weight gradient's own sum
// over the batch (conv batch*oh*ow, fc batch). With N the sum of all those
// lengths (an upper bound on the roundings any element passes through) and
// m the element's magnitude (the same sums on absolute values:
// ref::TrainGradients::magnitudes), the worst-case bound is
// |g32 - g| <= N u m (u = 2^-24), and rounding errors that behave as
// independent zero-mean variables (Higham and Mary's probabilistic
// analysis) give |g32 - g| <= lambda sqrt(N) u m, except with probability
// about 2 exp(-lambda^2 / 2) per element. lambda = 8 (a failure chance of
// 2.5e-14 per element, under 1e-7 over mnist_cnn's 1.2 M). Checked
// normwise per tensor: max |g32 - g| / max m <= 8 sqrt(N) u. mnist_cnn at
// batch 64: N = 53,931, bound 1.1e-4; a wrong index, mask or transposition
// moves a gradient by a sizeable share of m (1e-2 and more).
//
// Batch-norm in training mode adds per-channel reductions over M = N H W
// (up to 65,536 for resnet20 at batch 64): the step accumulates them in
// double, so their own rounding, about M 2^-53, is below fp32's u, and what
// remains is the fp32 roundings around them, per batch-norm layer 15:
// forward 5 (scale and shift rounded to fp32, z scale, + shift, + the
// residual), backward 7 (xhat = (z - mean) inv_std: 2; the means of dy and
// dy xhat rounded: 1; dy - mean(dy): 1; - xhat mean(dy xhat): 2; times
// scale: 1), dgamma and dbeta 3 (xhat's 2, the sum's rounding); and 2 per
// residual join (the forward add, the sum where the shortcut's two
// gradients meet). The magnitudes through batch-norm's backward are
// |gamma| inv_std (|dy| + mean |dy| + |xhat| mean |dy xhat|), and
// sum |dy| |xhat|, sum |dy| for dgamma, dbeta (ref::gradients): the
// batch-statistics terms' cancellation is measured against what cancels.
// resnet20 at batch 64: N = 77,308, bound 1.3e-4 (weight_sum, 65,536, the
// most of it).
std::int64_t gradient_chain_length(const Network& net, std::int64_t batch);
double gradient_tolerance(const Network& net, std::int64_t batch);

// The arithmetic of one step of `batch` images, what every training case
// reports as flops: forward 2 x MACs, backward 2 x MACs for the weight
// gradients and 2 x MACs for the input gradients of every conv and fc but
// the first (the first layer's input gradient is not computed).
double train_step_flops(const Network& net, std::int64_t batch);

// What a training case needs before it can run, `network`'s weights and the
// training set: "" when both load, else the message that says which is
// missing (the training cases report it as an input error).
std::string training_inputs_problem(std::string_view network);

// The bytes a step holds, allocated once.
struct TrainMemory {
  std::int64_t weights = 0;      // the parameters
  std::int64_t activations = 0;  // layer outputs kept for backward, pool indices, log-probabilities
  std::int64_t gradients = 0;    // one per parameter
  std::int64_t optimizer = 0;    // momentum buffers
  std::int64_t workspace = 0;    // backward's two gradient buffers, per-thread im2col and partial sums
  std::int64_t total() const { return weights + activations + gradients + optimizer + workspace; }
};

// The steps (each a row of the training variant table, train_variants.h,
// which makes them; each a backend of the training walk, train_walk.h):
//   make_im2col_step, Gemm::eigen or Gemm::onednn_sgemm: this file's im2col
//     step with its GEMMs (of the convolutions per image and of the fc
//     layers) by Eigen or by oneDNN's sgemm (its JIT kernels; builds with
//     oneDNN only).
//   make_onednn_train_step: oneDNN's training primitives for every layer
//     (train_onednn.cpp; convolution, inner product, pooling and eltwise
//     forward_training and backward, in the layouts they prefer).
//   make_own_train_step: the im2col step with every convolution on the own
//     direct kernel (cpu_direct, prepare_conv_direct_live): forward y =
//     conv(x, W); backward data (stride 1) dx = conv(dz zero-padded by
//     r - 1 - p, W rotated 180 degrees with its in and out channels
//     swapped); backward weights on the own weight-gradient kernel. Its fc
//     GEMMs stay on Eigen. Chains of stride-1 convolutions only:
//     batch-norm, joins and strides above 1 are refused by layer name
//     (dlb::Unsupported). Its sums fit gradient_chain_length's count as
//     they are: the kernel accumulates each output in one fp32 register
//     lane, term after term (one FMA rounding each), over c r r terms
//     forward, k r r backward data (the padding's taps add exact zeros) and
//     batch oh ow backward weights, the lengths counted for the im2col
//     step; so no bound of its own.
// Each throws dlb::Error for an unsupported network (see trainable_params)
// or a batch below 1, and dlb::Unsupported for a step this build lacks.

// The bound for oneDNN's step (make_onednn_train_step): gradient_tolerance's
// but that oneDNN's batch-norm (its batch_normalization primitives) sums in
// fp32, not double: the forward's mean and variance (two passes: the mean,
// then sum (z - mean)^2) and the backward's sum dy and sum dy xhat, per
// channel over M = batch oh ow terms each, in whatever order its threads
// split them: up to M - 1 roundings each on every chain through the layer,
// 4 M per batch-norm layer on top of the 15 counted for the double sums
// (the divisions by M, inv_std and the subtraction are among those 15, as
// in the double step). What those sums pass on is measured against the
// same magnitudes (ref::gradients' |dy| + mean |dy| + |xhat| mean |dy xhat|,
// and the batch statistics' scales for the running statistics). resnet20
// at batch 64: 21 batch-norm layers, 7 each at M = 65,536, 16,384 and
// 4,096, N = 77,308 + 2,408,448 = 2,485,756, bound 7.5e-4 (5.7 times the
// double step's).
std::int64_t onednn_gradient_chain_length(const Network& net, std::int64_t batch);
double onednn_gradient_tolerance(const Network& net, std::int64_t batch);

// Winograd's minimal filtering F(m, r) of a 1-D correlation,
// y_i = sum_j g_j d_(i+j) (i < m, j < r), from m + r - 1 points (Toom-Cook:
// the last one the point at infinity): y = A^T ((G g) . (B^T d)), with
// A^T [m x n], G [n x r], B^T [n x n] (n = m + r - 1), row-major. A 2-D
// tile applies each along both axes.
struct WinogradMatrices {
  int m = 0, r = 0;
  std::vector<double> at, g, bt;
};
// `finite_points`: the n - 1 finite points, distinct.
WinogradMatrices winograd_matrices(int m, int r, const std::vector<double>& finite_points);
// How far the transforms' constants magnify rounding errors, measured
// against the direct sum's magnitude: each output of the 1-D algorithm
// computed in floating point is off by at most (its roundings) x u x
// sum_k |A^T_ik| (|G| |g|)_k (|B^T| |d|)_k, which for inputs and weights of
// even magnitude is W_i = sum_k |A^T_ik| (sum_j |G_kj|) (sum_l |B^T_kl|)
// times what the direct sum's magnitude, sum_j |g_j| |d_(i+j)|, is per
// unit (r). The 2-D tile's factor is the square of the largest W_i / r
// (the transforms are applied along each axis). A diagonal rescaling of
// G's rows against B^T's (oneDNN scales them to balance their ranges)
// leaves it unchanged: only the points matter.
double winograd_magnitude_factor(const WinogradMatrices& w);

// The convolutions oneDNN's Winograd may run in the step with
// OnednnConv::winograd, ::onednn_winograd or ::fastest (below): 3x3,
// stride 1, input and output channels multiples of 16 (its jit_wino_4x3
// kernels' blocking; they take the forward, backward data and backward
// weights).
bool onednn_winograd_eligible(const Layer& l);
// The bound for oneDNN's step with Winograd (cpu_onednn_wino): cpu_onednn's
// count, and for every conv onednn_winograd_eligible takes, in each of its
// three directions, the Winograd sum's roundings magnified by its
// magnitude factor (squared, as the probabilistic rule adds variances):
// oneDNN's F(4x4, 3x3) on the points 0, +-5/8, +-3/2 and infinity (forward
// and backward data, whose correlation of the output gradient with the
// rotated weights is the same algorithm: factor 62.65), and F(3x3, 4x4) on
// the same points for the weight gradient (a tile's 4x4 output gradients
// as the filter over its 6x6 inputs: factor 50.15). Per direction a
// Winograd sum runs through 19 roundings besides its GEMM's: three a pass
// in each of the input, filter and output transforms (two passes each),
// and the product; its GEMM sums c (forward), k (backward data) or
// batch x tiles (the weight gradient; tiles: ceil(oh / 4) ceil(ow / 4))
// terms. So N += 62.65^2 (c + 19) + 62.65^2 (k + 19) per eligible conv, and
// the weight gradient's longest sum, max over eligible convs of 50.15^2
// (batch tiles + 19), is added too. Every term is counted whichever
// algorithm the step picks (direct terms as cpu_onednn's), so the bound
// holds for any mix.
//
// The convs the own Winograd (kernels/conv/conv_winograd_nhwc.h: F(4x4, 3x3)
// on the points 0, +-1, +-2 and infinity) may run in oneDNN's step with
// OnednnConv::winograd or ::fastest, forward and backward data: those
// onednn_winograd_eligible takes, padding at most 2, whose activations keep
// a pixel's channels in groups of 16 (oneDNN's nChw16c with AVX-512,
// nChw8c with AVX2; the kernel reads and writes them as it does NHWC,
// through kernels/conv/blocked16.h). The bound
// counts them too: with the points 0, +-1, +-2 the magnitude factor is
// 256, so N gains 256^2 (c + 19) + 256^2 (k + 19) per such conv.
bool own_winograd_eligible(const Layer& l);
// The convs whose weight gradient the own Winograd F(3x3, 4x4)
// (kernels/conv/conv_winograd_wgrad.h, the same points) may compute in
// oneDNN's step with OnednnConv::winograd or ::fastest: those
// own_winograd_eligible takes (all 16 of resnet20's convs, mnist_cnn's
// conv2, whose bias gradient the kernel sums as it reads dy: within
// gamma(16) of the sum, less than the direct sum's batch oh ow). Its
// magnitude factor is 1600/9 = 177.78, so where a network has one, the
// weight gradient's term above takes 177.78 in place of 50.15 for it.
//
// That term belongs to the conv's own weight gradient alone: no other
// gradient of the step reads it. onednn_winograd_chain_length and
// _tolerance are the widest bound, any tensor's (the largest term added);
// onednn_winograd_gradient_tolerances is the bound of each trainable
// tensor (trainable_params order), its layer's term added to the weight
// and bias of an eligible conv only (oneDNN's Winograd weight gradient
// may compute the bias in the same primitive). One bound for all would
// let mnist_cnn's fc and conv1 gradients take conv2's 4.3e-3, through
// which a step that misses one image of 64 passes
// (tests/test_train.cpp's AStepThatMissesAnImageFails).
//
// resnet20 at batch 64: 16 eligible convs, all 16 the own kernels' too in
// every direction, N = 254,791,566 (widest), bound 7.6e-3; mnist_cnn:
// conv2 (32 -> 64 channels, the own kernels in every direction), N =
// 82,779,987 for conv2's weight and bias (bound 4.34e-3, the widest),
// 9,361,716 for the other tensors (bound 1.46e-3).
bool own_winograd_weights_eligible(const Layer& l);
std::int64_t onednn_winograd_chain_length(const Network& net, std::int64_t batch);
double onednn_winograd_gradient_tolerance(const Network& net, std::int64_t batch);
std::vector<double> onednn_winograd_gradient_tolerances(const Network& net, std::int64_t batch);

// A training step: what every CPU step offers, whichever code runs it.
class TrainStep {
 public:
  virtual ~TrainStep() = default;

  // x: [batch, c, h, w] (network_input), labels: [batch], each < classes
  // (throws dlb::Error naming the image otherwise). Returns the mean loss.
  // x must stay valid until backward() returns.
  virtual double forward(const float* x, const std::uint8_t* labels) = 0;
  // The gradients of the last forward's loss (throws if there was none).
  virtual void backward() = 0;
  // One SGD-with-momentum update from the last backward's gradients.
  virtual void update() = 0;
  double step(const float* x, const std::uint8_t* labels) {
    const double loss = forward(x, labels);
    backward();
    update();
    return loss;
  }

  virtual std::int64_t batch() const = 0;
  virtual const Sgd& sgd() const = 0;
  virtual const std::vector<TrainParam>& params() const = 0;
  // The spans are in PyTorch's layout (state_dict order and shapes), valid
  // until the next forward, backward or update (oneDNN's step keeps its
  // parameters in oneDNN's layouts and converts them here). Values written
  // through the non-const param() are what the next forward reads.
  virtual std::span<const float> param(std::size_t i) const = 0;
  virtual std::span<float> param(std::size_t i) = 0;
  virtual std::span<const float> grad(std::size_t i) const = 0;
  virtual std::span<const float> velocity(std::size_t i) const = 0;
  // The last forward's log-probabilities, [batch, classes].
  virtual std::span<const float> log_probs() const = 0;
  // A conv layer's batch-norm running statistics (the state_dict's
  // running_mean, running_var), as the forwards so far left them; empty
  // for a layer without batch-norm.
  virtual std::span<const float> running_mean(std::size_t layer) const = 0;
  virtual std::span<const float> running_var(std::size_t layer) const = 0;
  virtual TrainMemory memory() const = 0;
  // What library kernel each of the step's primitives runs, one line each
  // ("conv2 forward: jit_wino_4x3:avx512_core"): oneDNN's step; empty for
  // steps that run their own loops.
  virtual std::vector<std::string> kernels() const { return {}; }
  // Where a step's time goes: `steps` whole steps on x and labels (they
  // change the parameters, as steps do), each of the walk's calls timed
  // alone (train_walk.h: layer_us.<i>.<direction>, the median over the
  // steps in microseconds), with update_us, profiled_us (their sum) and
  // profile_steps; oneDNN's step also splits the same calls by the kind of
  // work in them (op_us.<kind>: its primitives by oneDNN's kind,
  // convolution, batch_normalization, eltwise, binary, reorder, pooling,
  // inner_product, and own_winograd for the own kernels; each the mean
  // over the steps in microseconds). For outside any timed loop. Throws
  // dlb::Error for steps below 1.
  virtual std::vector<std::pair<std::string, double>> profile(const float* x, const std::uint8_t* labels,
                                                              int steps) = 0;
};

// The im2col step's GEMM library.
enum class Gemm { eigen, onednn_sgemm };
// Copy the network's parameters; `net` must outlive the step.
std::unique_ptr<TrainStep> make_im2col_step(const Network& net, std::int64_t batch, Sgd sgd, Gemm gemm);
std::unique_ptr<TrainStep> make_own_train_step(const Network& net, std::int64_t batch, Sgd sgd);
// Which algorithm oneDNN's step runs its convolutions with: direct
// (cpu_onednn); Winograd wherever onednn_winograd_eligible takes the conv,
// the own Winograd in the forward and backward data of those
// own_winograd_eligible takes and in the weight gradient of those
// own_winograd_weights_eligible takes (tests); oneDNN's Winograd wherever
// onednn_winograd_eligible takes the conv, the own kernels never (tests:
// oneDNN's jit_wino_4x3 in every direction); or per conv and direction the
// fastest of direct, oneDNN's Winograd and (where it takes the conv) the
// own, each timed on the step's own shapes when the step is made
// (cpu_onednn_wino).
enum class OnednnConv { direct, winograd, onednn_winograd, fastest };
// Whether oneDNN offers its Winograd training kernels (jit_wino_4x3) on this
// CPU (AVX-512): without them oneDNN's primitives are direct in every mode
// (the own Winograd aside).
bool onednn_has_winograd();
std::unique_ptr<TrainStep> make_onednn_train_step(const Network& net, std::int64_t batch, Sgd sgd,
                                                  OnednnConv conv = OnednnConv::direct);

}  // namespace dlb::nn
