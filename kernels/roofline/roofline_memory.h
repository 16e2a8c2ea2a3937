// The GPU memory ceiling (roofline/gpu_memory): the best of a few streaming
// kernels, each measured as a case is, so that it bounds every
// memory-bound GPU case by construction rather than by luck.
//
// Why (the H200 run of 2026-11-27, finding 11): the copy ceiling
// (cudaMemcpyAsync, one read to one write) read 4.24 TB/s and the triad
// (a = b + s*c into a third array, a grid-stride loop of 8 blocks per SM)
// 4.09 TB/s, while daxpy gpu_naive (y = a*x + y in place, one element per
// thread, every block launched at once) ran at 4.34 TB/s. A ceiling that
// one kernel defines is only as good as that kernel's traffic pattern and
// launch shape: HBM turns between reads and writes less often with two
// reads to a write than with one, an in-place update keeps two streams
// where a triad has three, and a full grid keeps more loads in flight than
// a grid-stride loop of a few blocks per SM. So the ceiling takes every
// pattern the memory-bound cases have (copy: softmax and the copies; two
// reads to one write, into a third array and in place: daxpy) in both
// launch shapes, 16-byte accesses, and the same 8-byte, one element a
// thread shape as gpu_naive, and is the fastest of them.
//
// Every part moves the same bytes per call (as counted: each array read or
// written once, the count the cases use), so the ceiling's time stays
// comparable between runs whichever part wins. Plain C++: the choice and
// the byte counts are tested on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace dlb {

enum class MemoryPattern {
  copy,    // c = a: one read, one write
  triad,   // a = b + s*c: two reads, one write to a third array
  update,  // b = b + s*c: two reads, one write in place (daxpy's traffic)
};

struct MemoryPart {
  std::string_view name;
  MemoryPattern pattern;
  int access_bytes;  // 16: double2 per access; 8: one double
  bool grid_stride;  // a grid-stride loop over 8 blocks per SM; else one access per thread, every block launched
};

// cudaMemcpyAsync first: the copy the old gpu_copy ceiling was.
inline constexpr MemoryPart kGpuMemoryParts[] = {
    {"memcpy", MemoryPattern::copy, 0, false},
    {"copy_vec", MemoryPattern::copy, 16, false},
    {"copy_vec_stride", MemoryPattern::copy, 16, true},
    {"triad_vec", MemoryPattern::triad, 16, false},
    {"triad_vec_stride", MemoryPattern::triad, 16, true},
    {"update_vec", MemoryPattern::update, 16, false},
    {"update_vec_stride", MemoryPattern::update, 16, true},  // daxpy gpu_vec's shape
    {"update", MemoryPattern::update, 8, false},             // daxpy gpu_naive's shape
};

// The bytes one element of a pattern moves, as the cases count them: each
// array read or written once (copy 2, triad and update 3 elements).
constexpr double memory_bytes_per_element(MemoryPattern p, std::size_t element_bytes) {
  return (p == MemoryPattern::copy ? 2.0 : 3.0) * static_cast<double>(element_bytes);
}

// The elements a part runs over so that it moves `bytes` (rounded down to
// an even count, for the 16-byte accesses).
std::int64_t memory_part_elements(MemoryPattern p, std::size_t element_bytes, double bytes);

// The index of the part with the highest bytes per second, each part's
// rate its bytes over the median of its `seconds`; -1 if no part was timed.
struct MemoryTiming {
  double bytes = 0;
  std::vector<double> seconds;
};
double median_seconds(std::span<const double> seconds);
int best_memory_part(std::span<const MemoryTiming> parts);

}  // namespace dlb
