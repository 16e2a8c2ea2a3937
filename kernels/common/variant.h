// The variant table: each operator lists its implementations once, as rows of
// Variant<Args>, and the benchmarks, the tests and (through the benchmark
// names) the plots all read that one table. Adding an implementation means one
// function and one row.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

// cudaStream_t is `CUstream_st*`; naming the struct keeps CUDA headers out of
// code that is not built with CUDA.
struct CUstream_st;

namespace dlb {

enum class Device { cpu, gpu };

constexpr std::string_view device_name(Device d) { return d == Device::cpu ? "cpu" : "gpu"; }

// Where a GPU variant runs. CPU variants ignore it.
struct Exec {
  CUstream_st* stream = nullptr;
};

// One call of a prepared operator on fixed buffers: the thing that is timed.
// GPU variants only enqueue work on Exec::stream; the caller synchronizes.
using Run = std::function<void()>;

// A row's precision, for the tables that have that column (nn.h specializes
// this for NetArgs, gemm.h for GemmArgs); the others carry an empty field.
struct NoPrecision {};
template <class Args>
struct VariantPrecision {
  using type = NoPrecision;
};

template <class Args>
struct Variant {
  // Stable, "<device>_<implementation>", the second part of the benchmark name.
  std::string_view name;
  Device device;
  // Setup outside the timed region (library primitives, descriptors,
  // workspace, handles) on the buffers named in args; throws
  // dlb::Unsupported when this variant cannot run this problem.
  Run (*prepare)(const Args& args, const Exec& exec);
  // Largest accepted error against the reference, as the relative max-norm
  // error max|out - ref| / max|ref| (see reference/compare.h). 0 means exact.
  double tolerance;
  // Run-time availability (CPU ISA extensions); nullptr means always.
  bool (*available)() = nullptr;
  // The problems this variant is written for (a Winograd kernel for 3x3
  // stride-1 filters only), asked before a case is registered or tested, so
  // that a row is not listed for shapes it was never meant to run; nullptr
  // means every problem. Only the shape fields of args are read. A library
  // that declines a shape at run time throws dlb::Unsupported from prepare
  // instead, and the case is reported as skipped with the library's reason.
  bool (*accepts)(const Args& args) = nullptr;
  // The threads one call runs on: 1 for single-threaded code, 0 for all the
  // process may use (OpenMP or the library's own threading). A memory-bound
  // case is measured against a ceiling on as many threads: one core's
  // bandwidth is not two cores' share of theirs.
  int threads = 0;
  // The tolerance for one problem where it depends on the shape (cuDNN's
  // nonfused Winograd, whose tile grows with the filter); nullptr means
  // `tolerance` for every problem. Only the shape fields of args are read.
  double (*problem_tolerance)(const Args& args) = nullptr;
  // What the row computes in (nn.h: NetPrecision, gemm.h: GemmPrecision),
  // where the table has that column; read by what depends on it (the
  // accuracy bound, the inputs a gemm row is given).
  typename VariantPrecision<Args>::type precision{};

  double tolerance_for(const Args& args) const {
    return problem_tolerance == nullptr ? tolerance : problem_tolerance(args);
  }
  bool usable() const { return available == nullptr || available(); }
  bool accepts_problem(const Args& args) const { return accepts == nullptr || accepts(args); }
};

template <class Args>
using VariantTable = std::span<const Variant<Args>>;

namespace detail {
template <class F>
struct first_arg;
template <class R, class A, class... Rest>
struct first_arg<R (*)(A, Rest...)> {
  using type = std::remove_cvref_t<A>;
};
}  // namespace detail

// prepare adapter for a variant that is one plain host function of its
// arguments, with no setup: `{"cpu_loop", Device::cpu, plain<daxpy_loop>, 0.0}`.
template <auto Fn>
Run plain(const typename detail::first_arg<decltype(Fn)>::type& args, const Exec&) {
  return [args] { Fn(args); };
}

// prepare adapter for a GPU launcher `void launch_x(const Args&, cudaStream_t)`.
template <auto Launch>
Run on_stream(const typename detail::first_arg<decltype(Launch)>::type& args, const Exec& exec) {
  return [args, stream = exec.stream] { Launch(args, stream); };
}

// The rows of `table` that run on `device` and are available on this machine.
template <class Args>
std::vector<const Variant<Args>*> usable_variants(VariantTable<Args> table, Device device) {
  std::vector<const Variant<Args>*> out;
  for (const auto& v : table)
    if (v.device == device && v.usable()) out.push_back(&v);
  return out;
}

}  // namespace dlb
