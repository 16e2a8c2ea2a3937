// The shared pieces: buffers, seeded data, the comparison every check uses.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <limits>
#include <vector>

#include "bench/cases/daxpy_case.h"
#include "bench/cases/softmax_case.h"
#include "kernels/common/buffer.h"
#include "kernels/common/cpu_info.h"
#include "kernels/common/device_bytes.h"
#include "kernels/common/error.h"
#include "kernels/common/random.h"
#include "kernels/roofline/roofline.h"
#include "kernels/roofline/roofline_memory.h"
#include "reference/compare.h"

namespace dlb {
namespace {

TEST(HostBuffer, IsAlignedAndMovable) {
  for (std::size_t n : {1u, 7u, 1000u}) {
    HostBuffer<float> b(n);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % kHostAlignment, 0u);
    float* p = b.data();
    HostBuffer<float> moved(std::move(b));
    EXPECT_EQ(moved.data(), p);
    EXPECT_EQ(b.data(), nullptr);
    EXPECT_EQ(moved.size(), n);
  }
  HostBuffer<double> empty(0);
  EXPECT_EQ(empty.data(), nullptr);
}

TEST(FillRandom, IsSeededAndPrefixStable) {
  std::vector<float> a(1000), b(1000), c(10);
  fill_random(a, 7);
  fill_random(b, 7);
  fill_random(c, 7);
  EXPECT_EQ(a, b);
  for (std::size_t i = 0; i < c.size(); ++i) EXPECT_EQ(a[i], c[i]);
  fill_random(b, 8);
  EXPECT_NE(a, b);
}

// The peers (scripts/dlbench/seeded.py) regenerate these inputs in NumPy;
// tests/test_peers.py holds the Python side to the same values.
TEST(FillRandom, GoldenValues) {
  std::vector<float> f(4096);
  fill_random(f, 51);
  std::uint64_t h = 0xcbf29ce484222325ULL;  // 64-bit FNV-1a over the floats' bytes
  for (float v : f) {
    unsigned char bytes[sizeof v];
    std::memcpy(bytes, &v, sizeof v);
    for (unsigned char b : bytes) h = (h ^ b) * 0x100000001b3ULL;
  }
  EXPECT_EQ(h, 0xe954d11870d5c32aULL);
  EXPECT_EQ(f[578], -0x1.3d785cp+2f);  // an outlier (x64)
  std::vector<double> d(1001);
  fill_random(d, 51);
  EXPECT_EQ(d[1000], -0x1.02ce57e5f931cp-2);
  EXPECT_EQ(unit_random(52, 7), 0x1.827a53b5dd029p-1);
}

TEST(FillRandomInt, IsInRangeAndTheSameWhateverTheThreadCount) {
  std::vector<std::uint8_t> parallel(1 << 18), serial(1 << 18);  // over the parallel threshold
  fill_random_int(parallel, 9, 1, 255);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  fill_random_int(serial, 9, 1, 255);
  omp_set_num_threads(threads);
  EXPECT_EQ(parallel, serial);
  EXPECT_EQ(*std::min_element(parallel.begin(), parallel.end()), 1);
  EXPECT_EQ(*std::max_element(parallel.begin(), parallel.end()), 255);
}

TEST(FillRandom, HasNoZerosAndSomeOutliers) {
  std::vector<double> v(1 << 16);
  fill_random(v, 3, FillSpec{-1.0, 1.0, 1e-3, 64.0});
  int zeros = 0, outliers = 0;
  for (double x : v) {
    zeros += x == 0.0;
    outliers += std::abs(x) > 1.0;
    ASSERT_LE(std::abs(x), 64.0);
  }
  EXPECT_EQ(zeros, 0);
  EXPECT_GT(outliers, 20);   // ~65 expected
  EXPECT_LT(outliers, 150);
}

TEST(PoisonNan, WritesNanEverywhere) {
  std::vector<float> v(33, 1.0f);
  poison_nan(v);
  for (float x : v) EXPECT_TRUE(std::isnan(x));
}

TEST(Compare, ExactAndWithinTolerance) {
  const std::vector<double> ref = {1.0, -2.0, 4.0};
  const std::vector<double> same = ref;
  EXPECT_TRUE(ref::compare(std::span<const double>(same), ref, 0.0).ok);
  const std::vector<double> close = {1.0, -2.0, 4.0 + 4e-6};  // 1e-6 of max|ref|
  EXPECT_FALSE(ref::compare(std::span<const double>(close), ref, 0.0).ok);
  const auto c = ref::compare(std::span<const double>(close), ref, 1e-5);
  EXPECT_TRUE(c.ok);
  EXPECT_NEAR(c.max_rel_err, 1e-6, 1e-12);
}

TEST(Compare, OneBadElementAmongManyFails) {
  std::vector<double> ref(1 << 20, 1.0);
  std::vector<float> out(ref.size(), 1.0f);
  out[12345] = 1.01f;
  const auto c = ref::compare(std::span<const float>(out), ref, 1e-3);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.mismatches, 1u);
  EXPECT_NE(c.first.find("[12345]"), std::string::npos) << c.first;
}

TEST(Compare, NanInOutputFailsWhateverTheTolerance) {
  const std::vector<double> ref = {1.0, 2.0};
  const std::vector<float> out = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  const auto c = ref::compare(std::span<const float>(out), ref, 1e9);
  EXPECT_FALSE(c.ok);
  EXPECT_TRUE(std::isinf(c.max_rel_err));
}

TEST(Compare, NanAndInfInReferenceMustBeMatched) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> ref = {nan, -inf, 0.5};
  EXPECT_TRUE(ref::compare(std::span<const float>(std::vector<float>{NAN, -INFINITY, 0.5f}), ref, 0.0).ok);
  EXPECT_FALSE(ref::compare(std::span<const float>(std::vector<float>{0.0f, -INFINITY, 0.5f}), ref, 1.0).ok);
  EXPECT_FALSE(ref::compare(std::span<const float>(std::vector<float>{NAN, INFINITY, 0.5f}), ref, 1.0).ok);
}

TEST(Compare, ListsAtMostTenMismatches) {
  std::vector<double> ref(100, 1.0);
  std::vector<double> out(100, 2.0);
  const auto c = ref::compare(std::span<const double>(out), ref, 0.1);
  EXPECT_EQ(c.mismatches, 100u);
  EXPECT_NE(c.summary().find("..."), std::string::npos);
  EXPECT_EQ(std::count(c.first.begin(), c.first.end(), ';'), 9);
}

TEST(CompareRows, EachRowAgainstItsOwnScale) {
  // Row 0 is on the scale of 1, row 1 on the scale of 1e-3: a 1e-3 relative
  // error in row 1 is 1e-6 of the global max, but 1e-3 of its own row.
  const std::vector<double> ref = {1.0, 0.5, 1e-3, 2e-3};
  const std::vector<float> out = {1.0f, 0.5f, 1e-3f, 2.002e-3f};
  EXPECT_TRUE(ref::compare(std::span<const float>(out), ref, 1e-5).ok);
  const auto c = ref::compare_rows(std::span<const float>(out), ref, 2, 1e-5);
  EXPECT_FALSE(c.ok);
  EXPECT_NEAR(c.max_rel_err, 1e-3, 1e-6);
  EXPECT_NE(c.first.find("[3]"), std::string::npos) << c.first;  // flat index
  EXPECT_TRUE(ref::compare_rows(std::span<const float>(out), ref, 2, 2e-3).ok);
  // An all-zero row compares absolutely; NaN rows must stay NaN.
  const std::vector<double> special = {0.0, 0.0, NAN, NAN};
  EXPECT_TRUE(ref::compare_rows(std::span<const float>(std::vector<float>{1e-6f, 0.0f, NAN, NAN}), special, 2, 1e-5).ok);
  EXPECT_FALSE(ref::compare_rows(std::span<const float>(std::vector<float>{0.0f, 0.0f, NAN, 1.0f}), special, 2, 1e-5).ok);
  EXPECT_THROW(ref::compare_rows(std::span<const float>(out), ref, 3, 1e-5), Error);
}

TEST(CompareScaled, EachTensorAgainstItsOwnScale) {
  // A gradient of 0.01 whose terms summed to magnitudes of 5: an error of
  // 1e-3 is 2e-4 of its scale, within 1e-3 though 10% of its own value.
  const std::vector<double> ref_a = {0.01, -0.005}, scale_a = {5.0, 2.0};
  const std::vector<float> out_a = {0.011f, -0.005f};
  // One on the scale of its values, off by 1e-2 of it.
  const std::vector<double> ref_b = {1.0, 2.0}, scale_b = {1.0, 2.0};
  const std::vector<float> out_b = {1.0f, 2.02f};
  const std::vector<ref::ScaledTensor> both = {{"a.weight", out_a, ref_a, scale_a}, {"b.bias", out_b, ref_b, scale_b}};
  const auto c = ref::compare_scaled(both, 1e-3);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.checked, 4u);
  EXPECT_EQ(c.mismatches, 1u);
  EXPECT_NEAR(c.max_rel_err, 1e-2, 1e-6);
  // Only the tensor over the bound is named, with its error and scale.
  EXPECT_EQ(c.first.find("a.weight"), std::string::npos) << c.first;
  EXPECT_NE(c.first.find("b.bias: error 0.01 of the largest magnitude 2 (bound 0.001)"), std::string::npos) << c.first;
  EXPECT_EQ(c.summary().find("..."), std::string::npos) << c.summary();
  // All within the bound: the worst one is named.
  const auto ok = ref::compare_scaled(both, 2e-2);
  EXPECT_TRUE(ok.ok);
  EXPECT_NE(ok.first.find("worst b.bias: error 0.01"), std::string::npos) << ok.first;
  // A NaN fails whatever the bound; an all-zero scale compares absolutely.
  const std::vector<float> nan_a = {NAN, -0.005f};
  EXPECT_FALSE(ref::compare_scaled(std::vector<ref::ScaledTensor>{{"a", nan_a, ref_a, scale_a}}, 1.0).ok);
  const std::vector<double> zero = {0.0, 0.0};
  EXPECT_TRUE(ref::compare_scaled(std::vector<ref::ScaledTensor>{{"z", out_a, ref_a, zero}}, 1.1e-3).ok);
  EXPECT_FALSE(ref::compare_scaled(std::vector<ref::ScaledTensor>{{"z", out_a, ref_a, zero}}, 0.9e-3).ok);
  EXPECT_THROW(ref::compare_scaled(std::vector<ref::ScaledTensor>{{"short", out_a, ref_a, std::span<const double>(zero.data(), 1)}}, 1.0),
               Error);
}

TEST(Compare, IntegersExactly) {
  const std::vector<std::int32_t> ref = {1, -7, 100000};
  EXPECT_TRUE(ref::compare(std::span<const std::int32_t>(ref), ref).ok);
  const std::vector<std::int32_t> off = {1, -7, 100001};
  EXPECT_FALSE(ref::compare(std::span<const std::int32_t>(off), ref).ok);
}

TEST(Compare, BytesExactlyWithTheFirstMismatchListed) {
  std::vector<std::uint8_t> ref(4097);
  fill_random_int(ref, 5, 1, 255);
  EXPECT_TRUE(ref::compare(std::span<const std::uint8_t>(ref), ref).ok);
  auto out = ref;
  out[4096] = 0;  // the last byte unwritten
  const auto c = ref::compare(std::span<const std::uint8_t>(out), ref);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.mismatches, 1u);
  EXPECT_NE(c.first.find("[4096] got 0"), std::string::npos) << c.first;
  EXPECT_THROW(ref::compare(std::span<const std::uint8_t>(out).first(7), ref), Error);
}

TEST(CpuInfo, SeesTheMachine) {
  EXPECT_GE(cpu_cores_usable(), 1);
  EXPECT_GE(cpu_threads(), 1);
  EXPECT_FALSE(cpu_model().empty());
  const CpuId id = cpu_id();
  EXPECT_EQ(id.vendor.size(), 12u) << id.vendor;
  EXPECT_GE(id.family, 1);
  EXPECT_NE(cpu_id_text(id).find("family " + std::to_string(id.family) + " model "), std::string::npos);
  EXPECT_FALSE(cpu_microarchitecture(id).empty());
}

// The family/model table, and CPUID leaf 1's encoding as /proc/cpuinfo
// decodes it (this machine's "cpu family" and "model" lines).
TEST(CpuInfo, MicroarchitectureFromFamilyAndModel) {
  EXPECT_EQ(cpu_microarchitecture({"AuthenticAMD", 25, 17, 1}), "zen4");    // EPYC 9004
  EXPECT_EQ(cpu_microarchitecture({"AuthenticAMD", 25, 1, 1}), "zen3");     // EPYC 7003
  EXPECT_EQ(cpu_microarchitecture({"AuthenticAMD", 26, 2, 0}), "zen5");     // EPYC 9005
  EXPECT_EQ(cpu_microarchitecture({"AuthenticAMD", 23, 49, 0}), "zen2");    // EPYC 7002
  EXPECT_EQ(cpu_microarchitecture({"GenuineIntel", 6, 143, 8}), "sapphire-rapids");
  EXPECT_EQ(cpu_microarchitecture({"GenuineIntel", 6, 207, 2}), "emerald-rapids");
  EXPECT_EQ(cpu_microarchitecture({"GenuineIntel", 6, 85, 7}), "skylake-sp");
  EXPECT_EQ(cpu_microarchitecture({"GenuineIntel", 6, 999, 0}), "f6m999");
  EXPECT_EQ(cpu_microarchitecture({"AuthenticAMD", 6, 143, 0}), "f6m143");  // the vendor counts

  std::ifstream in("/proc/cpuinfo");
  std::string line;
  int family = -1, model = -1;
  while (std::getline(in, line) && (family < 0 || model < 0)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    if (key == "cpu family") family = std::stoi(line.substr(colon + 1));
    if (key == "model") model = std::stoi(line.substr(colon + 1));
  }
  if (family < 0 || model < 0) GTEST_SKIP() << "/proc/cpuinfo has no cpu family / model lines";
  EXPECT_EQ(cpu_id().family, family);
  EXPECT_EQ(cpu_id().model, model);
}

// The GPU FMA ceiling's datasheet peak, 2 x lanes x SMs x clock, from the
// compute capability's fp32 lanes per SM: the H100 SXM (sm_90, 132 SMs,
// 1.98 GHz) is NVIDIA's 66.9 TFLOP/s, the A100 (sm_80, 108 SMs, 1.41 GHz)
// its 19.5, an RTX 4090 (sm_89, 128 SMs, 2.52 GHz) its 82.6.
TEST(GpuCeilings, DatasheetPeakFromLanesPerSm) {
  const auto peak = [](int major, int minor, int sms, double ghz) {
    return 2.0 * gpu_fp32_lanes_per_sm(major, minor) * sms * ghz * 1e9;
  };
  EXPECT_NEAR(peak(9, 0, 132, 1.98), 66.9e12, 0.1e12);
  EXPECT_NEAR(peak(8, 0, 108, 1.41), 19.5e12, 0.1e12);
  EXPECT_NEAR(peak(8, 9, 128, 2.52), 82.6e12, 0.1e12);
  EXPECT_EQ(gpu_fp32_lanes_per_sm(7, 0), 64);
  EXPECT_EQ(gpu_fp32_lanes_per_sm(8, 6), 128);
  EXPECT_EQ(gpu_fp32_lanes_per_sm(10, 0), 128);
}

// The device byte count (kernels/common/device_bytes.h) that measures a GPU
// training step's memory, fed by hand: DeviceMemory feeds the process's
// one the same way on a GPU. Each allocation must raise the live bytes,
// each free lower them by that allocation's size, and a watch's peak must
// keep what a temporary allocation raised.
TEST(DeviceByteCount, CountsLiveBytesAndEachWatchsPeak) {
  DeviceByteCount count;
  int a = 0, b = 0, c = 0, d = 0;
  count.allocated(&a, 1000);  // before any watch: not part of its rise
  DeviceBytePeak outer(count);
  EXPECT_EQ(outer.start_bytes(), 1000);
  count.allocated(&b, 300);
  EXPECT_EQ(count.live_bytes(), 1300);
  {
    DeviceBytePeak inner(count);
    count.allocated(&c, 5000);  // a search's temporary workspace
    EXPECT_TRUE(count.freed(&c));
    EXPECT_EQ(inner.rise(), 5000);
  }
  count.allocated(&d, 200);
  EXPECT_EQ(count.live_bytes(), 1500);
  EXPECT_EQ(count.allocations(), 3);
  EXPECT_EQ(outer.peak_bytes(), 6300);
  EXPECT_EQ(outer.rise(), 5300);
  // A watch started now sees only what comes after it.
  DeviceBytePeak later(count);
  EXPECT_EQ(later.rise(), 0);
  EXPECT_TRUE(count.freed(&b));
  EXPECT_TRUE(count.freed(&d));
  EXPECT_TRUE(count.freed(&a));
  EXPECT_EQ(count.live_bytes(), 0);
  EXPECT_EQ(count.allocations(), 0);
  EXPECT_EQ(later.rise(), 0);
  EXPECT_EQ(outer.rise(), 5300);  // a peak does not fall with the frees
}

TEST(DeviceByteCount, IgnoresWhatItDidNotCount) {
  DeviceByteCount count;
  int a = 0, stranger = 0;
  count.allocated(nullptr, 64);  // cudaMalloc of 0 bytes may give null
  count.allocated(&a, 64);
  EXPECT_FALSE(count.freed(&stranger));
  EXPECT_FALSE(count.freed(nullptr));
  EXPECT_EQ(count.live_bytes(), 64);
  EXPECT_TRUE(count.freed(&a));
  EXPECT_FALSE(count.freed(&a));  // twice: the second changes nothing
  EXPECT_EQ(count.live_bytes(), 0);
}

// Several threads allocating and freeing at once (the count is shared by
// the process): every byte comes back, and the peak is at least what one
// thread held at once.
TEST(DeviceByteCount, IsExactAcrossThreads) {
  DeviceByteCount count;
  DeviceBytePeak watch(count);
  constexpr int kThreads = 4, kEach = 2000;
  std::vector<std::vector<char>> slots(kThreads, std::vector<char>(kEach));
#pragma omp parallel for num_threads(kThreads)
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kEach; ++i) count.allocated(&slots[t][i], 16);
    for (int i = 0; i < kEach; ++i) count.freed(&slots[t][i]);
  }
  EXPECT_EQ(count.live_bytes(), 0);
  EXPECT_EQ(count.allocations(), 0);
  EXPECT_GE(watch.rise(), 16 * kEach);
  EXPECT_LE(watch.rise(), 16 * kEach * kThreads);
}

// The GPU memory ceiling (kernels/roofline/roofline_memory.h): the fastest
// of its parts, each part's bytes counted as the cases count theirs.
TEST(GpuMemoryCeiling, IsTheFastestPart) {
  // The H200 (2026-11-27), TB/s as 1.5 GB in that many seconds: the old
  // ceilings (memcpy 4.24, the grid-stride triad 4.09) and a part with
  // daxpy gpu_naive's shape (4.34, what gpu_naive ran at).
  const double bytes = 1.5e12;
  std::vector<MemoryTiming> parts = {{bytes, {1.5e12 / 4.24e12 * 1.01, 1.5e12 / 4.24e12, 1.5e12 / 4.24e12 * 1.2}},
                                     {bytes, {1.5e12 / 4.09e12}},
                                     {bytes, {1.5e12 / 4.34e12, 1.5e12 / 4.34e12 * 0.99, 1.5e12 / 4.34e12 * 1.5}},
                                     {bytes, {}}};  // not timed
  EXPECT_EQ(best_memory_part(parts), 2);
  // Rates, not times: a part that moves more bytes in more time can win.
  parts.push_back({3 * bytes, {2 * 1.5e12 / 4.34e12}});
  EXPECT_EQ(best_memory_part(parts), 4);
  EXPECT_EQ(best_memory_part(std::vector<MemoryTiming>{{bytes, {}}}), -1);
  EXPECT_DOUBLE_EQ(median_seconds(std::vector<double>{3, 1, 2}), 2);
}

TEST(GpuMemoryCeiling, CountsBytesAsTheCasesDo) {
  // daxpy: 24 bytes per element (read x, read y, write y), as the update and
  // the triad count theirs.
  for (const DaxpyVariant* v : usable_variants(daxpy_variants(), Device::cpu)) {
    const DaxpyCase c(*v, 1000);
    EXPECT_EQ(static_cast<double>(c.bytes_per_call()) / 1000, memory_bytes_per_element(MemoryPattern::update, 8));
    EXPECT_EQ(static_cast<double>(c.bytes_per_call()) / 1000, memory_bytes_per_element(MemoryPattern::triad, 8));
    break;
  }
  // softmax: one read and one write of each float, as the copy counts.
  for (const SoftmaxVariant* v : usable_variants(softmax_variants(SoftmaxKind::softmax), Device::cpu)) {
    const SoftmaxCase c(*v, SoftmaxKind::softmax, 10, 100);
    EXPECT_EQ(c.bytes_per_call() / 1000, memory_bytes_per_element(MemoryPattern::copy, sizeof(float)));
    break;
  }
  // Every part moves the same bytes a call (to within one element pair), so
  // the ceiling's time compares between runs whichever part wins.
  const double bytes = 3.0 * (1 << 29);
  for (const MemoryPart& p : kGpuMemoryParts) {
    const auto n = memory_part_elements(p.pattern, sizeof(double), bytes);
    EXPECT_EQ(n % 2, 0) << p.name;
    const double moved = memory_bytes_per_element(p.pattern, sizeof(double)) * static_cast<double>(n);
    EXPECT_LE(moved, bytes) << p.name;
    EXPECT_GT(moved, bytes - 2 * memory_bytes_per_element(p.pattern, sizeof(double))) << p.name;
  }
}

// The parts cover what the memory-bound GPU cases do: a copy, two reads to
// one write into a third array and in place, each in both launch shapes,
// and daxpy's own kernels' shapes (gpu_naive: one double a thread over a
// full grid; gpu_vec: double2 in a grid-stride loop). The ceiling the H200
// run read below gpu_naive had only the memcpy and the grid-stride triad.
TEST(GpuMemoryCeiling, HasAPartShapedAsEachStreamingKernel) {
  const auto has = [](MemoryPattern pattern, int access, bool stride) {
    return std::any_of(std::begin(kGpuMemoryParts), std::end(kGpuMemoryParts), [&](const MemoryPart& p) {
      return p.pattern == pattern && p.access_bytes == access && p.grid_stride == stride;
    });
  };
  EXPECT_TRUE(has(MemoryPattern::update, 8, false));   // daxpy gpu_naive
  EXPECT_TRUE(has(MemoryPattern::update, 16, true));   // daxpy gpu_vec
  for (MemoryPattern p : {MemoryPattern::copy, MemoryPattern::triad, MemoryPattern::update}) {
    EXPECT_TRUE(has(p, 16, false));
  }
  EXPECT_TRUE(has(MemoryPattern::copy, 16, true));
  EXPECT_TRUE(has(MemoryPattern::triad, 16, true));
  EXPECT_EQ(kGpuMemoryParts[0].name, "memcpy");
}

// The CPU STREAM kernels: exact on aligned destinations (the streaming-store
// path) and on unaligned ones (the plain loop), with a tail; and they stream
// wherever the build has AVX2 or AVX-512 (plain stores read each
// destination line for ownership, bytes the ceiling does not count: the
// Zen 3 VM's triad did, and daxpy read 1.28-1.40 of it).
TEST(StreamKernels, AreExactAndStreamWhereTheCpuCan) {
  constexpr std::int64_t n = 1003;
  HostBuffer<double> a(n + 1), b(n + 1), c(n + 1);
  fill_random(a.span(), 1);
  fill_random(b.span(), 2);
  fill_random(c.span(), 3);
  for (std::int64_t offset : {0, 1}) {
    HostBuffer<double> out(n + 1);
    stream_copy(a.data(), out.data() + offset, n);
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(out[static_cast<std::size_t>(i + offset)], a[static_cast<std::size_t>(i)]);
    stream_triad(out.data() + offset, b.data(), c.data(), 3.0, n);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto j = static_cast<std::size_t>(i);
      ASSERT_EQ(out[j + static_cast<std::size_t>(offset)], std::fma(3.0, c[j], b[j]));
    }
  }
#if defined(__AVX512F__) || defined(__AVX2__)
  EXPECT_STRNE(stream_store_kind(), "plain stores");
#else
  EXPECT_STREQ(stream_store_kind(), "plain stores");
#endif
}

}  // namespace
}  // namespace dlb
