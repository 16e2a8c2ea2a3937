// Suites: named sets of cases, chosen with --suite=NAME (bench's own flag).
//
//   full       every case the families register (the binary's default, as
//              Google Benchmark runs whatever is registered)
//   default    what scripts/bench runs unless told otherwise: every family at
//              one telling size per regime (cache and DRAM for the
//              memory-bound ops, the networks' shapes for gemm and conv,
//              the networks at batch 1 and 64, the layer profiles at one
//              batch: on the CPU batch 1 for cpu_onednn, cpu_onednn_s8 and
//              cpu_own_s8 only), on the CPU and, where there is one, the GPU
//   gpu-quick  the GPU families at their telling sizes (the ceilings; daxpy
//              and softmax at DRAM size and one cache size; gemm at 4096 and
//              the networks' shapes; every conv algorithm at the ResNet20
//              batch-64 shapes; copies at 1 MiB, 256 MiB, 1 GiB (pinned,
//              registered and write-combined: the 1 GiB pageable copies are
//              left out) and the 64 MiB pipeline; every GPU network backend
//              at batch 1, 64 and 1024 (but gpu_hybrid_first_conv and gpu_own
//              at 1024, and fp32 gpu_cudnn_fused at all); resnet20's GPU layers at
//              batch 64; the streamed test set;
//              the GPU training steps at batch 64 and 256, every copy mode):
//              what the GPU kit runs on a GPU machine (scripts/gpu-kit)
//
// A suite is a list of patterns (regular expressions searched in the case
// name without its time suffix), kept in suites.cpp next to each other so
// that what a suite holds is read in one place; --benchmark_filter then
// narrows the suite further. Shapes given on the command line (--conv=...,
// --shapes=FILE: bench/user_shapes.h) are always registered; given without
// --suite, they are all that is (the suite "descriptors").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dlb::bench {

struct Suite {
  std::string_view name;
  std::string_view help;
  std::vector<std::string_view> patterns;  // empty: every case
  bool needs_gpu = false;                  // holds GPU cases only: bench refuses it without a GPU
};

const std::vector<Suite>& suites();
// Selects the suite by name; throws dlb::Error naming the known suites for an
// unknown one. Until called, every case is in (the full suite).
void select_suite(std::string_view name);
const Suite& selected_suite();
// Whether the selected suite holds the case `name` ("<op>/<variant>/...").
bool suite_includes(std::string_view name);
// Descriptors given without --suite (user_shapes.h): from now on only the
// cases registered under a SuiteBypass are in; selected_suite() is then
// "descriptors".
void select_user_shapes_only();
// For cases the user asked for by shape (--conv=...): always registered.
class SuiteBypass {
 public:
  SuiteBypass();
  ~SuiteBypass();
  SuiteBypass(const SuiteBypass&) = delete;
  SuiteBypass& operator=(const SuiteBypass&) = delete;
};

}  // namespace dlb::bench
