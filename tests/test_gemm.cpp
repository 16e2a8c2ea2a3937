// gemm: every variant of the device this binary covers over tiny and odd
// shapes (m, n, k not multiples of 4, 6, 16 or 64, k = 1, long k), against
// the reference of the inputs it was given; integer paths exactly; the error
// against fp32 reported; the int32 edge of the integer paths; the table;
// bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "bench/cases/checked_run.h"
#include "bench/cases/gemm_case.h"
#include "kernels/common/cpu_info.h"
#include "kernels/common/error.h"
#if DLB_HAVE_ONEDNN
#include "kernels/common/onednn.h"
#endif
#include "kernels/common/random.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_vnni.h"
#include "reference/compare.h"
#include "reference/gemm.h"
#include "tests/test_device.h"

namespace dlb {
namespace {

struct Shape {
  std::int64_t m, n, k;
};

void PrintTo(const Shape& s, std::ostream* os) { *os << s.m << "x" << s.n << "x" << s.k; }

const Shape kShapes[] = {
    {1, 1, 1},     {1, 7, 33},      {7, 1, 5},     {2, 3, 2},      {7, 33, 13},   {33, 7, 1},
    {13, 65, 5},   {6, 64, 4},      {12, 128, 8},  {64, 10, 64},   {5, 17, 3},    {65, 129, 257},
    {1, 128, 9216}, {100, 1000, 35}, {4097, 7, 9}, {3, 4097, 70},  {128, 128, 128}, {250, 70, 1000},
    {1000, 1000, 1000}, {1000, 16, 144}, {517, 32, 288},  // a network's narrow convs (16 and 32 channels)
    // Shapes cuBLASLt's IMMA kernels take (n and k multiples of 4) with odd m
    // and odd multiples of 4, so that gpu_cublaslt_s8 is checked on more than
    // powers of two: it must run them (kImmaLegal).
    {7, 4, 4}, {33, 36, 20}, {129, 20, 132}, {5, 1000, 1000}, {257, 64, 1028},
};

// What cuBLASLt's int8 path must accept (gemm_cublaslt.cpp): n and k multiples of 4.
bool imma_legal(const Shape& s) { return s.n % 4 == 0 && s.k % 4 == 0; }

std::vector<const GemmVariant*> variants() { return usable_variants(gemm_variants(), test::kDevice); }

using Param = std::tuple<const GemmVariant*, Shape>;

class GemmTest : public ::testing::TestWithParam<Param> {};

TEST_P(GemmTest, MatchesReference) {
  const auto& [variant, s] = GetParam();
  std::unique_ptr<GemmCase> c;
  try {
    c = std::make_unique<GemmCase>(*variant, s.m, s.n, s.k);
  } catch (const Unsupported& e) {
    // An IMMA-legal shape declined by gpu_cublaslt_s8 is a failure: the row
    // would otherwise rest on the shapes it happens to take.
    if (variant->name == "gpu_cublaslt_s8" && imma_legal(s)) FAIL() << "declined an IMMA-legal shape: " << e.what();
    GTEST_SKIP() << e.what();
  }
  const auto result = c->validate();
  EXPECT_TRUE(result.ok) << variant->name << " " << s.m << "x" << s.n << "x" << s.k << ": " << result.summary();
  EXPECT_LE(result.max_rel_err, variant->tolerance);

  const double err = c->err_vs_f32();
  EXPECT_TRUE(std::isfinite(err)) << err;
  EXPECT_GE(err, 0.0);
  switch (c->precision()) {
    case GemmPrecision::f32:
      EXPECT_EQ(err, result.max_rel_err);
      break;
    case GemmPrecision::tf32:
    case GemmPrecision::bf16:
    case GemmPrecision::f16:
      EXPECT_LE(err, 1e-2);  // docs/architecture.md's bound for these precisions, against the fp32 problem
      break;
    case GemmPrecision::s8:
      // Below 2^24 every int32 sum converts to fp32 exactly, so every int8
      // path, oneDNN's too, must reproduce the reference bit for bit.
      if (c->max_abs_sum() < (std::int64_t{1} << 24)) {
        EXPECT_EQ(result.max_rel_err, 0.0);
      }
      break;
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [variant, s] = info.param;
  return std::string(variant->name) + "_" + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
         std::to_string(s.k);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmTest, ::testing::Combine(::testing::ValuesIn(variants()), ::testing::ValuesIn(kShapes)),
                         param_name);

std::vector<const GemmVariant*> s8_variants() {
  std::vector<const GemmVariant*> out;
  for (const auto* v : variants())
    if (v->precision == GemmPrecision::s8) out.push_back(v);
  return out;
}

// The int8 paths at the edge of int32: k up to kGemmS8MaxK and every product at
// its largest magnitude, 255 * 127 (A = 255 with zero point 0, or A = 0 with
// zero point 255). Sums near 2^31 must come out exact: no saturation of the
// four-product sums (vpdpbusd, dp4a, IMMA), no overflow.
// Parameters (variant, k, zero point): k with and without a tail of k % 4 values.
using EdgeParam = std::tuple<const GemmVariant*, std::int64_t, std::int32_t>;

class GemmS8EdgeTest : public ::testing::TestWithParam<EdgeParam> {};

TEST_P(GemmS8EdgeTest, ExactAtTheInt32Edge) {
  const auto& [variant, k, zero_point] = GetParam();
  constexpr std::int64_t m = 2, n = 20;
  const Device device = variant->device;
  Operand<std::uint8_t> a_u8(m * k, Device::cpu);
  Operand<std::int8_t> a_s8(device == Device::gpu ? m * k : 0, device), b(k * n, device);
  Operand<float> scale(n, device), c(m * n, device);
  std::fill(a_u8.host().begin(), a_u8.host().end(), static_cast<std::uint8_t>(255 - zero_point));
  for (std::int64_t p = 0; p < k; ++p)
    for (std::int64_t j = 0; j < n; ++j) b.host()[p * n + j] = static_cast<std::int8_t>(j % 2 == 0 ? 127 : -127);
  if (device == Device::gpu)
    std::transform(a_u8.host().begin(), a_u8.host().end(), a_s8.host().begin(),
                   [](std::uint8_t q) { return static_cast<std::int8_t>(q - 128); });
  std::fill(scale.host().begin(), scale.host().end(), 1.0f);
  a_s8.upload();
  b.upload();
  scale.upload();

  GemmArgs args;
  args.m = m;
  args.n = n;
  args.k = k;
  args.a_u8 = device == Device::cpu ? a_u8.data() : nullptr;
  args.a_s8 = device == Device::gpu ? a_s8.data() : nullptr;
  args.a_zero_point = zero_point;
  args.b_s8 = b.data();
  args.c_scale = scale.data();
  args.c = c.data();
  ExecContext ctx(device);
  dlb::Run run;
  try {
    run = variant->prepare(args, ctx.exec());
  } catch (const Unsupported& e) {
    GTEST_SKIP() << e.what();
  }

  const auto sums = ref::gemm_rows_u8s8(a_u8.host().data(), zero_point, b.host().data(), n, k, ref::spread_rows(m, m));
  ASSERT_GT(std::abs(sums[0]), std::int64_t{1} << 30);  // the sums really are near the edge
  ASSERT_LT(std::abs(sums[0]), std::int64_t{1} << 31);
  std::vector<double> expected(sums.size());
  for (std::size_t e = 0; e < sums.size(); ++e) expected[e] = static_cast<double>(static_cast<float>(sums[e]));
  const auto result = checked_run(run, ctx, c, expected, variant->tolerance);
  EXPECT_TRUE(result.ok) << variant->name << ": " << result.summary();
}

#if DLB_HAVE_ONEDNN
// Why cpu_onednn_s8 (and the network row of the same name) is registered
// only where onednn_int8_exact(): one row of 255s times one column of 127s,
// k = 64. The exact sum is 64 x 255 x 127 = 2,072,640; a kernel that adds
// each pair of products in a saturating 16-bit lane (vpmaddubsw, AVX2
// without VNNI) gets 32 x 32,767 = 1,048,544. The matmul is created
// directly, past the table, on every CPU: where this fails, the row's
// availability no longer says what oneDNN does here.
TEST(OnednnInt8, ExactExactlyWhereTheRowIsRegistered) {
  constexpr std::int64_t m = 1, n = 16, k = 64;
  const std::vector<std::uint8_t> a(m * k, 255);
  const std::vector<std::int8_t> b(k * n, 127);
  const std::vector<float> scale(n, 1.0f);
  std::vector<float> c(m * n, std::nanf(""));
  GemmArgs args;
  args.m = m;
  args.n = n;
  args.k = k;
  args.a_u8 = a.data();
  args.b_s8 = b.data();
  args.c_scale = scale.data();
  args.c = c.data();
  const dlb::Run run = prepare_gemm_onednn_s8(args, Exec{});
  run();
  const float exact = 64.0f * 255.0f * 127.0f;
  const bool all_exact = std::all_of(c.begin(), c.end(), [&](float v) { return v == exact; });
  EXPECT_EQ(all_exact, onednn_int8_exact()) << "c[0] = " << c[0] << ", the exact sum " << exact;
}
#endif

#if DLB_HAVE_CUDA
// cuBLASLt declines shapes it has no int8 kernel for, and the parametrized
// tests skip those: so that a broken cuBLASLt cannot pass as "declined
// everything", a shape its IMMA kernels take (n, k multiples of 4, aligned)
// must run and be exact.
TEST(GemmCublasLt, AnIMMAShapeRuns) {
  if (test::kDevice != Device::gpu) GTEST_SKIP() << "GPU variants";
  const auto all = variants();
  const auto it = std::find_if(all.begin(), all.end(), [](const GemmVariant* v) { return v->name == "gpu_cublaslt_s8"; });
  ASSERT_NE(it, all.end());
  GemmCase c(**it, 128, 128, 128);  // no Unsupported allowed here
  const auto result = c.validate();
  EXPECT_TRUE(result.ok) << result.summary();
  EXPECT_EQ(result.max_rel_err, 0.0);
}
#endif

std::string edge_param_name(const ::testing::TestParamInfo<EdgeParam>& info) {
  const auto& [variant, k, zero_point] = info.param;
  return std::string(variant->name) + "_k" + std::to_string(k) + "_zp" + std::to_string(zero_point);
}

INSTANTIATE_TEST_SUITE_P(Int8, GemmS8EdgeTest,
                         ::testing::Combine(::testing::ValuesIn(s8_variants()),
                                            ::testing::Values(kGemmS8MaxK - kGemmS8MaxK % 4, kGemmS8MaxK),
                                            ::testing::Values(0, 255)),
                         edge_param_name);

TEST(GemmTable, NamesEndInTheirPrecision) {
  for (const auto& v : gemm_variants()) {
    const std::string name(v.name);
    EXPECT_TRUE(name.ends_with("_" + std::string(precision_name(v.precision)))) << name;
    EXPECT_EQ(name.substr(0, 4), v.device == Device::cpu ? "cpu_" : "gpu_") << name;
  }
}

TEST(GemmTable, HasEveryVariantOfThisDevice) {
  std::vector<std::string> names;
  for (const auto* v : variants()) names.emplace_back(v->name);
  auto has = [&](const char* name) { return std::find(names.begin(), names.end(), name) != names.end(); };
  if (test::kDevice == Device::cpu) {
    EXPECT_TRUE(has("cpu_naive_f32"));
    EXPECT_TRUE(has("cpu_ref_s8"));
    // Registered exactly where the CPU has VNNI, whatever the build targets.
    EXPECT_EQ(has("cpu_vnni_s8"), cpu_has_avx512_vnni());
#if DLB_HAVE_EIGEN
    EXPECT_TRUE(has("cpu_eigen_f32"));
#endif
#if DLB_HAVE_ONEDNN
    EXPECT_TRUE(has("cpu_onednn_f32"));
    // Registered where oneDNN computes them (bf16) and computes them exactly
    // (int8); oneDNN 2.6 has bf16 wherever the CPU has AVX-512.
    EXPECT_EQ(has("cpu_onednn_bf16"), onednn_has_bf16());
    if (cpu_has_avx512f()) {
      EXPECT_TRUE(onednn_has_bf16());
    }
    EXPECT_EQ(has("cpu_onednn_s8"), onednn_int8_exact());
#endif
  } else {
    EXPECT_EQ(names.size(), 5u);
  }
}

// The VNNI GEMM's network-layer output stage (gemm_vnni.h), for the int8
// networks: the integer sums exact, then the fp32 steps in the kernel's
// order reproduced here bit for bit (scale and bias by one fused
// multiply-add, dequantized residual by another, ReLU, multiply by 1 / out_scale, round to nearest
// even, zero point, saturate), and within one code of the same arithmetic
// in double precision. Shapes with every panel width (n = 10, 30, 70), rows
// gathered on demand and read in place, with and without residual and ReLU,
// u8 and fp32 outputs.
TEST(GemmVnniLayerOutput, RequantizesAsItsReference) {
  if (!cpu_has_avx512_vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  int case_index = 0;
  for (const Shape s : {Shape{37, 10, 27}, Shape{50, 30, 144}, Shape{29, 70, 301}}) {
    for (const bool residual : {false, true}) {
      for (const bool u8_out : {true, false}) {
        for (const bool gathered : {false, true}) {
          SCOPED_TRACE(testing::Message() << s.m << "x" << s.n << "x" << s.k << " residual " << residual << " u8 "
                                          << u8_out << " gathered " << gathered);
          const auto seed = static_cast<std::uint64_t>(++case_index) * 1000;
          std::vector<std::uint8_t> a(static_cast<std::size_t>(s.m * s.k)), res(static_cast<std::size_t>(s.m * s.n));
          std::vector<std::int8_t> b(static_cast<std::size_t>(s.k * s.n));
          fill_random_int(std::span<std::uint8_t>(a), seed + 1, 0, 255);
          fill_random_int(std::span<std::int8_t>(b), seed + 2, -127, 127);
          fill_random_int(std::span<std::uint8_t>(res), seed + 3, 0, 255);
          std::vector<float> c_scale(static_cast<std::size_t>(s.n)), bias(c_scale.size());
          fill_random(c_scale, seed + 4, {.lo = 2e-6, .hi = 1e-5, .outlier_fraction = 0});
          fill_random(bias, seed + 5, {.lo = -0.5, .hi = 0.5, .outlier_fraction = 0});
          const std::int32_t za = 37;
          VnniOutput o;
          o.bias = bias.data();
          o.residual = residual ? res.data() : nullptr;
          o.residual_scale = 0.01f;
          o.residual_zero_point = 120;
          o.relu = !residual;  // both with and without ReLU over the loop
          o.out_scale = 0.013f;
          o.out_zero_point = residual ? 90 : 0;
          std::vector<std::uint8_t> out_u8(static_cast<std::size_t>(s.m * s.n), 7);
          std::vector<float> out_f32(out_u8.size(), -1);
          if (u8_out) {
            o.out_u8 = out_u8.data();
          } else {
            o.out_f32 = out_f32.data();
          }
          GemmArgs g;
          g.m = s.m;
          g.n = s.n;
          g.k = s.k;
          g.a_u8 = gathered ? nullptr : a.data();
          g.a_zero_point = za;
          g.b_s8 = b.data();
          g.c_scale = c_scale.data();
          GatherRows gather;
          if (gathered) {
            gather = [&](std::int64_t row0, int rows, std::uint8_t* dst) {
              std::copy_n(a.begin() + row0 * s.k, rows * s.k, dst);
            };
          }
          prepare_gemm_vnni_s8_out(g, o, gather)();
          int off_by_one = 0;
          for (std::int64_t i = 0; i < s.m; ++i) {
            for (std::int64_t j = 0; j < s.n; ++j) {
              std::int64_t acc = 0;
              for (std::int64_t p = 0; p < s.k; ++p)
                acc += (static_cast<std::int64_t>(a[static_cast<std::size_t>(i * s.k + p)]) - za) *
                       b[static_cast<std::size_t>(p * s.n + j)];
              const auto at = static_cast<std::size_t>(i * s.n + j);
              const auto col = static_cast<std::size_t>(j);
              float v = std::fma(static_cast<float>(acc), c_scale[col], bias[col]);
              double d = static_cast<double>(acc) * c_scale[col] + bias[col];
              if (residual) {
                const auto r = static_cast<float>(static_cast<int>(res[at]) - o.residual_zero_point);
                v = std::fma(r, o.residual_scale, v);
                d += static_cast<double>(r) * o.residual_scale;
              }
              if (o.relu) {
                v = std::max(v, 0.0f);
                d = std::max(d, 0.0);
              }
              if (!u8_out) {
                ASSERT_EQ(out_f32[at], v) << "at " << i << "," << j;
                continue;
              }
              const float inv = 1.0f / o.out_scale;
              const auto code = [&](double x) {
                return static_cast<int>(std::clamp(std::nearbyint(x) + o.out_zero_point, 0.0, 255.0));
              };
              ASSERT_EQ(out_u8[at], code(v * inv)) << "at " << i << "," << j;
              const int exact = code(d / o.out_scale);
              ASSERT_LE(std::abs(out_u8[at] - exact), 1) << "at " << i << "," << j;
              off_by_one += out_u8[at] != exact;
            }
          }
          // fp32 rounding moves a code only at a near-tie; and the codes
          // are not all saturated (the test would prove little).
          EXPECT_LE(off_by_one, s.m * s.n / 100 + 1);
          if (u8_out) {
            const auto inside = std::count_if(out_u8.begin(), out_u8.end(), [](int c) { return c > 0 && c < 255; });
            EXPECT_GT(inside, static_cast<long>(out_u8.size() / 4));  // ReLU zeroes about half
          }
        }
      }
    }
  }
}

// The implicit GEMM over a shifted image (gemm_vnni.h) against the same
// conv as patches gathered into rows of A: the same integer sums, so the
// same codes and floats bit for bit. Rows that tiles do not divide (9, 11,
// 26 and 3 pixels, for tiles of 6, 12 and 24 rows), r x r windows of 3 and
// 5 and r x 1 ones (an input expanded to window rows), one image and
// several, every panel width, with and without a residual, u8 and fp32
// outputs.
TEST(GemmVnniShiftedImage, EqualsGatheredPatches) {
  if (!cpu_has_avx512_vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  struct Conv {
    std::int64_t images, rows, cols, channels, window, window_cols, n;
  };
  int case_index = 0;
  for (const Conv cv : {Conv{3, 7, 9, 16, 3, 3, 16}, Conv{1, 32, 32, 4, 3, 3, 16}, Conv{2, 8, 8, 32, 3, 3, 32},
                        Conv{2, 5, 6, 64, 3, 3, 64}, Conv{2, 6, 11, 4, 5, 5, 20}, Conv{1, 9, 3, 12, 3, 3, 70},
                        Conv{2, 5, 26, 4, 3, 1, 32}, Conv{1, 6, 24, 8, 5, 1, 20}}) {
    for (const bool residual : {false, true}) {
      for (const bool u8_out : {true, false}) {
        SCOPED_TRACE(testing::Message() << cv.images << "x" << cv.rows << "x" << cv.cols << "x" << cv.channels
                                        << " window " << cv.window << "x" << cv.window_cols << " n " << cv.n
                                        << " residual " << residual
                                        << " u8 " << u8_out);
        const auto seed = static_cast<std::uint64_t>(++case_index) * 1000 + 7;
        const std::int64_t pad = cv.window / 2, pad_cols = cv.window_cols / 2, pitch = cv.cols + cv.window_cols - 1,
                           height = cv.rows + cv.window - 1;
        const std::int64_t m = cv.images * cv.rows * cv.cols, k = cv.window * cv.window_cols * cv.channels;
        const std::uint8_t za = 37;  // the padding: the code of 0
        std::vector<std::uint8_t> image(static_cast<std::size_t>(cv.images * height * pitch * cv.channels), za);
        std::vector<std::uint8_t> pixels(static_cast<std::size_t>(m * cv.channels));
        fill_random_int(std::span<std::uint8_t>(pixels), seed + 1, 0, 255);
        for (std::int64_t i = 0; i < cv.images; ++i)
          for (std::int64_t y = 0; y < cv.rows; ++y)
            std::copy_n(pixels.begin() + ((i * cv.rows + y) * cv.cols) * cv.channels, cv.cols * cv.channels,
                        image.begin() + ((i * height + y + pad) * pitch + pad_cols) * cv.channels);
        std::vector<std::int8_t> b(static_cast<std::size_t>(k * cv.n));
        fill_random_int(std::span<std::int8_t>(b), seed + 2, -127, 127);
        std::vector<std::uint8_t> res(static_cast<std::size_t>(m * cv.n));
        fill_random_int(std::span<std::uint8_t>(res), seed + 3, 0, 255);
        std::vector<float> c_scale(static_cast<std::size_t>(cv.n)), bias(c_scale.size());
        fill_random(c_scale, seed + 4, {.lo = 2e-6, .hi = 1e-5, .outlier_fraction = 0});
        fill_random(bias, seed + 5, {.lo = -0.5, .hi = 0.5, .outlier_fraction = 0});
        GemmArgs g;
        g.m = m;
        g.n = cv.n;
        g.k = k;
        g.a_zero_point = za;
        g.b_s8 = b.data();
        g.c_scale = c_scale.data();
        const auto run = [&](bool shifted) {
          std::vector<std::uint8_t> out_u8(static_cast<std::size_t>(m * cv.n), 7);
          std::vector<float> out_f32(out_u8.size(), -1);
          VnniOutput o;
          o.bias = bias.data();
          o.residual = residual ? res.data() : nullptr;
          o.residual_scale = 0.01f;
          o.residual_zero_point = 120;
          o.relu = true;
          o.out_scale = 0.013f;
          o.out_zero_point = 90;
          if (u8_out) {
            o.out_u8 = out_u8.data();
          } else {
            o.out_f32 = out_f32.data();
          }
          if (shifted) {
            prepare_gemm_vnni_s8_out(g, o, ShiftedImage{image.data(), cv.images, cv.rows, cv.cols, cv.channels,
                                                        cv.window, cv.window_cols})();
          } else {
            // Row i of A: pixel (image, y, x)'s window rows of the padded image.
            prepare_gemm_vnni_s8_out(g, o, [&](std::int64_t row0, int rows, std::uint8_t* dst) {
              for (std::int64_t i = row0; i < row0 + rows; ++i) {
                const std::int64_t x = i % cv.cols, y = i / cv.cols % cv.rows, n = i / (cv.cols * cv.rows);
                for (std::int64_t s = 0; s < cv.window; ++s, dst += cv.window_cols * cv.channels)
                  std::copy_n(image.begin() + ((n * height + y + s) * pitch + x) * cv.channels,
                              cv.window_cols * cv.channels, dst);
              }
            })();
          }
          return std::make_pair(out_u8, out_f32);
        };
        const auto gathered = run(false);
        const auto shifted = run(true);
        EXPECT_EQ(shifted.first, gathered.first);
        ASSERT_EQ(shifted.second.size(), gathered.second.size());
        for (std::size_t i = 0; i < shifted.second.size(); ++i)
          ASSERT_EQ(shifted.second[i], gathered.second[i]) << "at " << i;  // -1 where never written
        if (u8_out) {  // and the comparison is not between two untouched buffers
          EXPECT_LT(std::count(gathered.first.begin(), gathered.first.end(), std::uint8_t{7}),
                    static_cast<long>(gathered.first.size() / 4));
        }
      }
    }
  }
}

TEST(GemmVnniShiftedImage, MismatchedShapesAreAClearError) {
  if (!cpu_has_avx512_vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  std::vector<std::uint8_t> image(4 * 4 * 4, 0), out(2 * 2 * 8);  // 2 x 2 padded by 1, 4 channels
  std::vector<std::int8_t> b(36 * 8, 1);  // k = 36 at most
  std::vector<float> scale(8, 1), bias(8, 0);
  GemmArgs g;
  g.m = 4;
  g.n = 8;
  g.k = 27;
  g.b_s8 = b.data();
  g.c_scale = scale.data();
  VnniOutput o;
  o.bias = bias.data();
  o.out_u8 = out.data();
  // 3 channels: a window row of 9 bytes splits a group of 4.
  EXPECT_THROW(prepare_gemm_vnni_s8_out(g, o, ShiftedImage{image.data(), 1, 2, 2, 3, 3, 3}), Error);
  g.k = 36;
  EXPECT_NO_THROW(prepare_gemm_vnni_s8_out(g, o, ShiftedImage{image.data(), 1, 2, 2, 4, 3, 3}));
  // k = 3 * 3 * 4, but m is not 1 x 3 x 2.
  EXPECT_THROW(prepare_gemm_vnni_s8_out(g, o, ShiftedImage{image.data(), 1, 3, 2, 4, 3, 3}), Error);
  // A window of no columns.
  EXPECT_THROW(prepare_gemm_vnni_s8_out(g, o, ShiftedImage{image.data(), 1, 2, 2, 4, 9, 0}), Error);
  EXPECT_THROW(prepare_gemm_vnni_s8_out(g, o, ShiftedImage{nullptr, 1, 2, 2, 4, 3, 3}), Error);
}

TEST(GemmBadInput, NonPositiveDimensionsAreAClearError) {
  for (const auto* v : variants()) {
    for (const Shape s : {Shape{0, 4, 4}, Shape{4, -3, 4}, Shape{4, 4, 0}}) {
      try {
        GemmCase c(*v, s.m, s.n, s.k);
        FAIL() << v->name << ": no error for " << s.m << "x" << s.n << "x" << s.k;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("must be >= 1"), std::string::npos) << e.what();
      }
    }
  }
}

TEST(GemmBadInput, Int8KBeyondInt32IsAClearError) {
  for (const auto* v : s8_variants()) {
    try {
      GemmCase c(*v, 1, 1, kGemmS8MaxK + 1);
      FAIL() << v->name << ": no error for k = " << kGemmS8MaxK + 1;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("may overflow"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace dlb
