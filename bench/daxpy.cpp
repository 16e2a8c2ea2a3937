// daxpy/<variant>/n:<n>: y = a*x + y over n from 2^10 (cache-resident) to
// 2^26 (1.5 GiB moved per call: DRAM). bytes_per_second counts 24 bytes per
// element (read x, read y, write y) for every variant. GPU cases flush L2
// before each call (the default Timing), so on a GPU even the small sizes
// start from DRAM: "cache-resident" describes the CPU side only. CPU cases
// are bracketed by roofline/cpu_triad's kernel (time_memory_bound), on the
// variant's thread count: frac_of_ceiling is daxpy over triad measured in
// the same second on as many cores. With --daxpy=n:N (bench/user_shapes.h):
// at that n alone (with --suite given too: that n and the suite's).
#include <optional>
#include <utility>
#include <vector>

#include "bench/cases/daxpy_case.h"
#include "bench/harness.h"
#include "bench/suites.h"
#include "bench/user_shapes.h"

namespace dlb::bench {
namespace {

// The user's sizes (registered whatever the suite), then the family's own
// where wanted, but those the user gave.
std::vector<std::pair<DaxpyShape, bool>> sizes() {
  std::vector<std::pair<DaxpyShape, bool>> out;
  const auto& user = user_shapes().daxpy;
  for (const DaxpyShape& s : user) out.emplace_back(s, true);
  if (own_shapes_wanted())
    for (int log2n = 10; log2n <= 26; ++log2n)
      if (const DaxpyShape s{std::int64_t{1} << log2n}; !is_user_shape(user, s)) out.emplace_back(s, false);
  return out;
}

void register_daxpy(Config& config) {
  for (const DaxpyVariant* variant : variants_to_run(daxpy_variants(), config)) {
    for (const auto& [size, user] : sizes()) {
      std::optional<SuiteBypass> bypass;
      if (user) bypass.emplace();
      const std::int64_t n = size.n;
      add_case(case_name("daxpy", variant->name, {{"n", n}}), variant->device,
               [variant, n](benchmark::State& state) {
                 auto* c = validated_case<DaxpyCase>(state, *variant, n);
                 if (c == nullptr) return;
                 time_memory_bound(state, [c] { c->run(); }, c->context(),
                                   static_cast<double>(c->bytes_per_call()), Ceiling::cpu_triad, variant->threads);
               });
    }
  }
}

DLB_BENCH_FAMILY(register_daxpy,
                 "how close a streaming kernel (y = a*x + y, 2^10 to 2^26 doubles) comes to the memory ceiling, "
                 "from cache to DRAM");

}  // namespace
}  // namespace dlb::bench
