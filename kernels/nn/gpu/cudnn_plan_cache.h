// The process-wide cache of gpu_cudnn_fused(_f16)'s conv plans: a cuDNN
// execution plan of a layer's operation graph, with its runtime-compiled
// engine and the engine choice timed among the candidates, costs about a
// second to build (4-11 s a resnet20 backend on an H200, where its one pass
// takes 0.1 ms). Built once per process for each key, whichever backend
// instance, test or benchmark case asks first; later ones with the same key
// reuse the plan and its timed choice.
//
// The key (fused_plan_key) holds everything the plan depends on:
//  - the device (its ordinal in this process): a plan is built with a cuDNN
//    handle, and a handle belongs to the device current when it was made;
//  - the activations' data type (fp32, fp16, bf16): the graph's tensors'
//    types, and which engines the row allows (numerical notes: fp32 rows no
//    tensor cores, allowed_notes in nn_gpu_cudnn_16bit.cpp);
//  - the graph, field by field as nn_gpu_cudnn_16bit.cpp's graph_parts reads
//    the plan: every tensor's uid, dims (the batch among them), strides,
//    virtual flag and fp32 flag; every op's kind and operands; the conv's
//    padding and stride; whether the graph is the fused chain or the conv
//    alone.
// Not in it, and why: the layer's index and name (two layers of one shape
// run one plan: resnet20's stage convs), the buffers (a plan is run on any
// buffers through a variant pack; the engine is timed on the first caller's,
// as the benchmark's first case would), and what is fixed in the code or
// the process (the heuristic modes, the candidates per mode, the byte
// alignment, the conv's compute type, cuDNN's version).
//
// Internal to kernels/nn; builds without CUDA, so the key and the cache's
// logic are tested on the CPU (test_nn: CudnnPlanCache).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "kernels/nn/gpu/cudnn_fused_plan.h"

namespace dlb::nn {

// What a fused conv's plan is keyed by (see above). `io_type` names the
// activations' type ("f32", "f16", "bf16").
std::string fused_plan_key(int device, const std::string& io_type, const FusedConvPlan& plan);

// A thread-safe map from key to a value built once. get() returns the
// value of `key`, calling build() on the first call for it (a miss); later
// calls (hits) return that value. Concurrent callers of one key wait for the
// one build; a build that throws leaves nothing (the next caller builds).
// Values are kept for the life of the cache.
template <class V>
class PlanCache {
 public:
  V get(const std::string& key, const std::function<V()>& build) {
    std::shared_ptr<Entry> e;
    {
      const std::lock_guard lock(mutex_);
      auto& slot = entries_[key];
      if (slot == nullptr) slot = std::make_shared<Entry>();
      e = slot;
    }
    const std::lock_guard lock(e->mutex);
    if (!e->built) {
      e->value = build();
      e->built = true;
      const std::lock_guard count(mutex_);
      ++misses_;
    } else {
      const std::lock_guard count(mutex_);
      ++hits_;
    }
    return e->value;
  }
  std::size_t hits() const {
    const std::lock_guard lock(mutex_);
    return hits_;
  }
  std::size_t misses() const {
    const std::lock_guard lock(mutex_);
    return misses_;
  }

 private:
  struct Entry {
    std::mutex mutex;
    bool built = false;
    V value{};
  };
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Entry>> entries_;
  std::size_t hits_ = 0, misses_ = 0;
};

}  // namespace dlb::nn
