#include "kernels/nn/train/train_variants.h"

#include <vector>

#include "kernels/common/error.h"

namespace dlb::nn {
namespace {

// Each CPU row's bound is gradient_tolerance (the double batch-norm sums'
// bound: train.h) but cpu_onednn's, which counts its fp32 batch-norm sums
// (onednn_gradient_tolerance), and cpu_onednn_wino's, which counts its
// Winograd convolutions' too (onednn_winograd_gradient_tolerance). The GPU step sums batch-norm in double as
// the CPU step does and is held to the same bound (train_gpu.h).
double double_sums_bound(const Network& net, std::int64_t batch) { return gradient_tolerance(net, batch); }

std::unique_ptr<TrainStep> make_eigen(const Network& net, std::int64_t batch, Sgd sgd) {
  return make_im2col_step(net, batch, sgd, Gemm::eigen);
}
#if DLB_HAVE_ONEDNN
std::unique_ptr<TrainStep> make_onednn(const Network& net, std::int64_t batch, Sgd sgd) {
  return make_onednn_train_step(net, batch, sgd, OnednnConv::direct);
}
std::unique_ptr<TrainStep> make_onednn_wino(const Network& net, std::int64_t batch, Sgd sgd) {
  return make_onednn_train_step(net, batch, sgd, OnednnConv::fastest);
}
std::unique_ptr<TrainStep> make_sgemm(const Network& net, std::int64_t batch, Sgd sgd) {
  return make_im2col_step(net, batch, sgd, Gemm::onednn_sgemm);
}
#endif
#if DLB_HAVE_CUDNN
template <GpuLaunch Launch>
std::unique_ptr<GpuTrainStep> make_gpu(const Network& net, std::int64_t batch, Sgd sgd, CUstream_st* stream) {
  return std::make_unique<GpuTrainStep>(net, batch, sgd, stream, Launch);
}
#endif

const TrainVariant kTrainVariants[] = {
    {"cpu_eigen", Device::cpu, make_eigen, nullptr, double_sums_bound, nullptr,
     "im2col + Eigen GEMM, fp32, SGD momentum 0.9", true},
#if DLB_HAVE_ONEDNN
    {"cpu_onednn_sgemm", Device::cpu, make_sgemm, nullptr, double_sums_bound, nullptr,
     "im2col + oneDNN sgemm, fp32, SGD momentum 0.9"},
    {"cpu_onednn", Device::cpu, make_onednn, nullptr, onednn_gradient_tolerance, nullptr,
     "oneDNN training primitives, fp32, SGD momentum 0.9", true},
    {"cpu_onednn_wino", Device::cpu, make_onednn_wino, nullptr, onednn_winograd_gradient_tolerance, nullptr,
     "oneDNN training primitives, Winograd F(4x4, 3x3) where faster, fp32, SGD momentum 0.9", false,
     onednn_winograd_gradient_tolerances},
#endif
    {"cpu_own", Device::cpu, make_own_train_step, nullptr, double_sums_bound, stride1_conv_chain,
     "own direct conv (fwd, bwd data, bwd weights) + Eigen fc, fp32, SGD momentum 0.9"},
#if DLB_HAVE_CUDNN
    {"gpu_cudnn", Device::gpu, nullptr, make_gpu<GpuLaunch::eager>, double_sums_bound, nullptr,
     "cuDNN + cuBLAS fp32"},
    {"gpu_cudnn_graph", Device::gpu, nullptr, make_gpu<GpuLaunch::graph>, double_sums_bound, nullptr,
     "cuDNN + cuBLAS fp32"},
#endif
};

}  // namespace

TrainVariantTable train_variants() { return kTrainVariants; }

std::vector<double> TrainVariant::tensor_tolerances(const Network& net, std::int64_t batch) const {
  if (tolerances != nullptr) return tolerances(net, batch);
  return std::vector<double>(trainable_params(net).size(), tolerance(net, batch));
}

bool TrainVariant::refuses(std::string_view network) const {
  if (accepts == nullptr) return false;
  const Network* net = nullptr;
  try {
    net = &nn::network(network);
  } catch (const std::exception&) {
    return false;
  }
  return !accepts(*net);
}

namespace {

const TrainVariant& named_row(std::string_view name, const std::vector<const TrainVariant*>& rows,
                              std::string_view what) {
  for (const auto* v : rows)
    if (v->name == name) return *v;
  std::string list;
  for (std::size_t i = 0; i < rows.size(); ++i)
    list.append(i == 0 ? "" : i + 1 == rows.size() ? " or " : ", ").append(rows[i]->name);
  throw Error(std::string(what) + " is " + list + ", not '" + std::string(name) + "'");
}

}  // namespace

const TrainVariant& train_variant(std::string_view name, Device device, std::string_view what) {
  std::vector<const TrainVariant*> rows;
  for (const auto& v : kTrainVariants)
    if (v.device == device) rows.push_back(&v);
  return named_row(name, rows, what);
}

const TrainVariant& train_variant(std::string_view name, std::string_view what) {
  std::vector<const TrainVariant*> rows;
  for (const auto& v : kTrainVariants) rows.push_back(&v);
  return named_row(name, rows, what);
}

bool stride1_conv_chain(const Network& net) {
  for (const auto& l : net.layers)
    if (l.kind == LayerKind::conv && (l.stride != 1 || l.residual >= 0 || !l.raw.bn_name.empty())) return false;
  return true;
}

}  // namespace dlb::nn
