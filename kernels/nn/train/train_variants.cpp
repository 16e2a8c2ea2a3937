#include "kernels/nn/train/train_variants.h"

#include <vector>

#include "kernels/common/error.h"

namespace dlb::nn {
namespace {

// Each CPU row's bound is gradient_tolerance for its implementation
// (cpu_onednn's counts its fp32 batch-norm sums; the others' are the double
// sums' bound: train.h). The GPU step sums batch-norm in double as the CPU
// step does and is held to the same bound (train_gpu.h).
template <TrainImpl Impl>
double cpu_bound(const Network& net, std::int64_t batch) {
  return gradient_tolerance(net, batch, Impl);
}
double gpu_bound(const Network& net, std::int64_t batch) { return gradient_tolerance(net, batch); }

constexpr GpuLaunch kUnused = GpuLaunch::eager;

const TrainVariant kTrainVariants[] = {
    {"cpu_eigen", Device::cpu, TrainImpl::eigen, kUnused, cpu_bound<TrainImpl::eigen>, nullptr,
     "im2col + Eigen GEMM, fp32, SGD momentum 0.9", true},
#if DLB_HAVE_ONEDNN
    {"cpu_onednn_sgemm", Device::cpu, TrainImpl::onednn_sgemm, kUnused, cpu_bound<TrainImpl::onednn_sgemm>, nullptr,
     "im2col + oneDNN sgemm, fp32, SGD momentum 0.9"},
    {"cpu_onednn", Device::cpu, TrainImpl::onednn, kUnused, cpu_bound<TrainImpl::onednn>, nullptr,
     "oneDNN training primitives, fp32, SGD momentum 0.9", true},
#endif
    {"cpu_own", Device::cpu, TrainImpl::own, kUnused, cpu_bound<TrainImpl::own>, stride1_conv_chain,
     "own direct conv (fwd, bwd data, bwd weights) + Eigen fc, fp32, SGD momentum 0.9"},
#if DLB_HAVE_CUDNN
    {"gpu_cudnn", Device::gpu, TrainImpl::eigen, GpuLaunch::eager, gpu_bound, nullptr, "cuDNN + cuBLAS fp32"},
    {"gpu_cudnn_graph", Device::gpu, TrainImpl::eigen, GpuLaunch::graph, gpu_bound, nullptr, "cuDNN + cuBLAS fp32"},
#endif
};

}  // namespace

TrainVariantTable train_variants() { return kTrainVariants; }

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

const TrainVariant& train_variant(std::string_view name, Device device, std::string_view what) {
  std::vector<const TrainVariant*> rows;
  for (const auto& v : kTrainVariants)
    if (v.device == device) rows.push_back(&v);
  for (const auto* v : rows)
    if (v->name == name) return *v;
  std::string list;
  for (std::size_t i = 0; i < rows.size(); ++i)
    list.append(i == 0 ? "" : i + 1 == rows.size() ? " or " : ", ").append(rows[i]->name);
  throw Error(std::string(what) + " is " + list + ", not '" + std::string(name) + "'");
}

const TrainVariant& train_variant(TrainImpl impl) {
  for (const auto& v : kTrainVariants)
    if (v.device == Device::cpu && v.impl == impl) return v;
  throw Unsupported("training step: this build has no row for that implementation");
}

bool stride1_conv_chain(const Network& net) {
  for (const auto& l : net.layers)
    if (l.kind == LayerKind::conv && (l.stride != 1 || l.residual >= 0 || !l.raw.bn_name.empty())) return false;
  return true;
}

}  // namespace dlb::nn
