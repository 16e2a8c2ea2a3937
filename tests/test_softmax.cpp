// softmax and log-softmax: every variant of the device this binary covers,
// over tiny, odd and large shapes, unaligned rows and the special inputs of
// bench/cases/softmax_case.h, each validated as the benchmark validates it
// (row-wise relative error, NaN and inf where the reference has them, rows
// summing to 1). The CPU binary also checks the reference itself on
// hand-made rows, the exp that cpu_naive and cpu_fused share, and cpu_fused
// at other thread counts.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "bench/cases/softmax_case.h"
#include "kernels/common/error.h"
#include "reference/softmax.h"
#include "tests/test_device.h"

namespace dlb {
namespace {

struct Param {
  SoftmaxKind kind;
  const SoftmaxVariant* variant;
  std::int64_t rows, cols;
  SoftmaxInput input;
  std::size_t x_offset = 0, y_offset = 0;
};

void PrintTo(const Param& p, std::ostream* os);  // the test name says it all

std::vector<const SoftmaxVariant*> variants(SoftmaxKind kind) {
  return usable_variants(softmax_variants(kind), test::kDevice);
}

// Whether a NaN input makes the variant's whole output row NaN, as the
// reference's does. oneDNN 2.6 does not: its row max lets the NaN through
// and its exp sends NaN to 0, so the row comes out 0 (log-softmax: -inf)
// except for NaN at the NaN's own position. Other rows are unaffected there
// too (SoftmaxNan.StaysInItsRow).
bool nan_fills_row(const SoftmaxVariant& v) { return v.name != "cpu_onednn"; }

// Whether a row of only -inf comes out NaN (0/0), as the reference's does.
// Every variant's does except gpu_cudnn's on some row lengths: the cuDNN
// documentation does not say what such a row gives, and what
// cudnnSoftmaxForward gives depends on the row length (its kernel choice),
// as measured on sm_90:
//   - rows of 7 and 33: 0 (softmax) and -inf (log-softmax) on the whole row
//     (H100, cuDNN 9.14, 2026-11-26: every element of rows 0 and 2 of 3x7
//     and 4x33; H200, cuDNN 9.19, 2026-11-27: the same rows);
//   - rows of 1, 1000, 4097 and 40000: NaN, as the reference (H100, cuDNN
//     9.14; on the H200, cuDNN 9.19, the 4097 row's first element was NaN,
//     the other lengths were not run there).
// The lengths in between were not measured. SoftmaxAllMasked states both
// behaviours; a cuDNN that changes either fails it.
bool all_masked_row_is_nan(const SoftmaxVariant& v, std::int64_t cols) {
  return v.name != "gpu_cudnn" || (cols != 7 && cols != 33);
}
// Shapes chosen for the code paths: cols 1, odd, not a multiple of 16 (AVX-512)
// or 4 (float4); warp-per-row with 1 to 32 elements per lane (cols <= 1024),
// block per row (to 32768) and longer rows on the GPU; one row, which
// cpu_fused splits across threads; a partial last block of warp rows (37).
constexpr std::int64_t kShapes[][2] = {{1, 1},   {3, 1},    {1, 7},    {5, 10},   {2, 33},   {37, 100},
                                       {3, 128}, {7, 1000}, {2, 4096}, {2, 4097}, {3, 40000}, {1, 70001}};
constexpr std::int64_t kSpecialShapes[][2] = {{2, 1}, {3, 7}, {4, 33}, {3, 1000}, {2, 4097}, {2, 40000}};
constexpr SoftmaxInput kSpecialInputs[] = {SoftmaxInput::large_magnitude, SoftmaxInput::masked,
                                           SoftmaxInput::one_unmasked,    SoftmaxInput::all_equal,
                                           SoftmaxInput::all_masked,      SoftmaxInput::nan};

std::vector<Param> params() {
  std::vector<Param> out;
  for (SoftmaxKind kind : {SoftmaxKind::softmax, SoftmaxKind::log_softmax}) {
    for (const SoftmaxVariant* v : variants(kind)) {
      for (const auto& [rows, cols] : kShapes) out.push_back({kind, v, rows, cols, SoftmaxInput::random});
      for (SoftmaxInput input : kSpecialInputs) {
        if (input == SoftmaxInput::nan && !nan_fills_row(*v)) continue;
        for (const auto& [rows, cols] : kSpecialShapes) {
          if (input == SoftmaxInput::all_masked && !all_masked_row_is_nan(*v, cols)) continue;
          out.push_back({kind, v, rows, cols, input});
        }
      }
      out.push_back({kind, v, 20, 300, SoftmaxInput::mixed});
      // Unaligned and differently aligned rows.
      out.push_back({kind, v, 5, 33, SoftmaxInput::masked, 1, 3});
      out.push_back({kind, v, 3, 1024, SoftmaxInput::random, 1, 0});
      out.push_back({kind, v, 2, 4096, SoftmaxInput::random, 0, 2});
      // y past kSoftmaxStreamingBytes: cpu_fused's streaming stores, with an unaligned head and a tail.
      out.push_back({kind, v, 1031, 4099, SoftmaxInput::mixed, 1, 3});
    }
  }
  return out;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const Param& p = info.param;
  return std::string(softmax_op_name(p.kind)) + "_" + std::string(p.variant->name) + "_r" + std::to_string(p.rows) +
         "_c" + std::to_string(p.cols) + "_" + softmax_input_name(p.input) + "_x" + std::to_string(p.x_offset) +
         "_y" + std::to_string(p.y_offset);
}

void PrintTo(const Param& p, std::ostream* os) { *os << param_name({p, 0}); }

class SoftmaxTest : public ::testing::TestWithParam<Param> {};

TEST_P(SoftmaxTest, MatchesReference) {
  const Param& p = GetParam();
  SoftmaxCase c(*p.variant, p.kind, p.rows, p.cols, p.input, p.x_offset, p.y_offset);
  const auto result = c.validate();
  EXPECT_TRUE(result.ok) << param_name({p, 0}) << ": " << result.summary();
  EXPECT_LE(result.max_rel_err, p.variant->tolerance);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SoftmaxTest, ::testing::ValuesIn(params()), param_name);

// Runs `input` (the pattern in the even rows, the odd rows random) through
// the variant: the random rows must match the reference, and
// `check(row, r)` judges each patterned row.
template <class Check>
void check_patterned_rows(const SoftmaxVariant& v, SoftmaxKind kind, std::int64_t rows, std::int64_t cols,
                          SoftmaxInput input, Check&& check) {
  SoftmaxCase c(v, kind, rows, cols, input);
  c.validate();
  const auto y = c.output();
  const auto expected = c.expected();
  const auto n = static_cast<std::size_t>(cols);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    const auto row = y.subspan(r * n, n);
    if (r % 2 == 1) {
      const auto result = ref::compare_rows(row, expected.subspan(r * n, n), n, v.tolerance);
      EXPECT_TRUE(result.ok) << v.name << " row " << r << ": " << result.summary();
      continue;
    }
    check(row, r);
  }
}

// A NaN input stays in its row: the NaN's own output is NaN (the whole row
// where nan_fills_row), and the random rows next to it match the reference.
// Checked on the output itself, for every variant.
TEST(SoftmaxNan, StaysInItsRow) {
  for (SoftmaxKind kind : {SoftmaxKind::softmax, SoftmaxKind::log_softmax}) {
    for (const SoftmaxVariant* v : variants(kind)) {
      for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{4, 100}, {3, 7}, {2, 4097}}) {
        check_patterned_rows(*v, kind, rows, cols, SoftmaxInput::nan, [&](std::span<const float> row, std::size_t r) {
          EXPECT_TRUE(std::isnan(row[row.size() / 3])) << v->name << " row " << r;
          if (nan_fills_row(*v)) {
            EXPECT_TRUE(std::all_of(row.begin(), row.end(), [](float e) { return std::isnan(e); }))
                << v->name << " row " << r;
          }
        });
      }
    }
  }
}

// gpu_cudnn's all -inf rows, as measured (see all_masked_row_is_nan): the
// whole row NaN on the lengths where cuDNN was measured to give NaN, 0
// (log-softmax: -inf) on every element on the lengths where it was measured
// to give that; the random rows next to them as the reference's. The
// Shapes/SoftmaxTest all_masked cases check the same NaN rows (and every
// other variant's) against the reference.
TEST(SoftmaxAllMasked, CudnnGivesWhatWasMeasured) {
  int checked = 0;
  for (SoftmaxKind kind : {SoftmaxKind::softmax, SoftmaxKind::log_softmax}) {
    const float masked = kind == SoftmaxKind::softmax ? 0.0f : -std::numeric_limits<float>::infinity();
    for (const SoftmaxVariant* v : variants(kind)) {
      if (v->name != "gpu_cudnn") continue;
      for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{2, 1},
                                       {3, 7}, {4, 33}, {3, 1000}, {2, 4097}, {2, 40000}}) {
        const bool nan = all_masked_row_is_nan(*v, cols);
        check_patterned_rows(*v, kind, rows, cols, SoftmaxInput::all_masked,
                             [&](std::span<const float> row, std::size_t r) {
                               for (std::size_t j = 0; j < row.size(); ++j) {
                                 if (nan) {
                                   ASSERT_TRUE(std::isnan(row[j]))
                                       << v->name << " cols " << cols << " row " << r << " col " << j << ": "
                                       << row[j] << ", measured NaN";
                                 } else {
                                   ASSERT_EQ(row[j], masked)
                                       << v->name << " cols " << cols << " row " << r << " col " << j
                                       << ", measured " << masked;
                                 }
                               }
                             });
        ++checked;
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no gpu_cudnn variant on this device";
}

TEST(SoftmaxTable, HasEveryVariantOfThisDevice) {
  const auto names = [](SoftmaxKind kind) {
    std::vector<std::string> out;
    for (const auto* v : variants(kind)) out.emplace_back(v->name);
    return out;
  };
  const auto has = [](const std::vector<std::string>& list, const char* name) {
    return std::find(list.begin(), list.end(), name) != list.end();
  };
  const auto softmax = names(SoftmaxKind::softmax), log_softmax = names(SoftmaxKind::log_softmax);
  if (test::kDevice == Device::cpu) {
    for (const char* name : {"cpu_naive", "cpu_fused"}) EXPECT_TRUE(has(softmax, name)) << name;
    EXPECT_TRUE(has(log_softmax, "cpu_fused"));
  } else {
    for (const char* name : {"gpu_naive", "gpu_fused", "gpu_online"}) EXPECT_TRUE(has(softmax, name)) << name;
    for (const char* name : {"gpu_fused", "gpu_online"}) EXPECT_TRUE(has(log_softmax, name)) << name;
  }
}

TEST(SoftmaxBadInput, EmptyShapesAreAClearError) {
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{0, 10}, {4, 0}, {-1, 3}}) {
    for (const SoftmaxVariant* v : variants(SoftmaxKind::softmax)) {
      try {
        SoftmaxCase c(*v, SoftmaxKind::softmax, rows, cols);
        FAIL() << "no error for rows " << rows << ", cols " << cols;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("rows and cols must be >= 1"), std::string::npos) << e.what();
      }
    }
  }
}

#if !DLB_TEST_GPU

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<double> reference(SoftmaxKind kind, const std::vector<float>& x, std::int64_t cols) {
  std::vector<double> y(x.size());
  if (kind == SoftmaxKind::softmax) {
    ref::softmax(x, cols, y);
  } else {
    ref::log_softmax(x, cols, y);
  }
  return y;
}

TEST(SoftmaxReference, SmallRowByHand) {
  const auto y = reference(SoftmaxKind::softmax, {1.0f, 2.0f, 3.0f}, 3);
  const double s = std::exp(-2.0) + std::exp(-1.0) + 1.0;
  EXPECT_DOUBLE_EQ(y[0], std::exp(-2.0) / s);
  EXPECT_DOUBLE_EQ(y[1], std::exp(-1.0) / s);
  EXPECT_DOUBLE_EQ(y[2], 1.0 / s);
  const auto log_y = reference(SoftmaxKind::log_softmax, {1.0f, 2.0f, 3.0f}, 3);
  EXPECT_DOUBLE_EQ(log_y[2], -std::log(s));
}

TEST(SoftmaxReference, SpecialRows) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Rows of 4: large values, masked entries, all masked but one, all equal, all masked, a NaN.
  const std::vector<float> x = {1e4f, -1e4f, 1e4f + 1.0f, 5.0f,  // large magnitude
                                0.5f, -kInf, 1.5f, -kInf,        // masked
                                -kInf, -kInf, 2.0f, -kInf,       // one unmasked
                                3.0f, 3.0f, 3.0f, 3.0f,          // all equal
                                -kInf, -kInf, -kInf, -kInf,      // all masked: 0/0
                                0.1f, nan, 0.3f, 0.4f};          // NaN
  const auto y = reference(SoftmaxKind::softmax, x, 4);
  const double s = 1.0 + std::exp(-1.0);
  EXPECT_DOUBLE_EQ(y[0], std::exp(-1.0) / s);
  EXPECT_DOUBLE_EQ(y[1], 0.0);
  EXPECT_DOUBLE_EQ(y[2], 1.0 / s);
  EXPECT_DOUBLE_EQ(y[3], 0.0);
  EXPECT_DOUBLE_EQ(y[4], 1.0 / (1.0 + std::exp(1.0)));
  EXPECT_EQ(y[5], 0.0);
  EXPECT_EQ(y[7], 0.0);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(y[8 + j], j == 2 ? 1.0 : 0.0);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(y[12 + j], 0.25);
  for (int j = 0; j < 4; ++j) EXPECT_TRUE(std::isnan(y[16 + j]));
  for (int j = 0; j < 4; ++j) EXPECT_TRUE(std::isnan(y[20 + j]));

  const auto log_y = reference(SoftmaxKind::log_softmax, x, 4);
  EXPECT_EQ(log_y[5], -INFINITY);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(log_y[8 + j], j == 2 ? 0.0 : -INFINITY);
  for (int j = 0; j < 4; ++j) EXPECT_DOUBLE_EQ(log_y[12 + j], -std::log(4.0));
  for (int j = 0; j < 4; ++j) EXPECT_TRUE(std::isnan(log_y[16 + j]));
  for (int j = 0; j < 4; ++j) EXPECT_TRUE(std::isnan(log_y[20 + j]));
}

TEST(SoftmaxReference, BadShapeIsAClearError) {
  std::vector<double> y(6);
  const std::vector<float> x(6, 1.0f);
  EXPECT_THROW(ref::softmax(x, 4, y), Error);
  EXPECT_THROW(ref::softmax(x, 0, y), Error);
}

// An exp over an array against double exp over x in [-103, top]: within 3
// ulp over the normal range (x from -87.33 up), 0 below (no subnormals, as
// with flush-to-zero).
void expect_exp_accurate(void (*exp)(const float*, float*, std::int64_t), double top,
                         std::initializer_list<float> extra) {
  constexpr float kFlushBelow = -87.33f;  // exp(-87.33) = 1.18e-38, just above FLT_MIN
  std::vector<float> x;
  for (double v = -103.0; v <= top; v += 0.000731) x.push_back(static_cast<float>(v));
  for (float v : {0.0f, -0.0f, -1e-30f, -0.34657359f, kFlushBelow, -87.3f}) x.push_back(v);
  x.insert(x.end(), extra);
  std::vector<float> y(x.size());
  exp(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
  double worst_ulps = 0.0;
  float worst_x = 0.0f;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i] < kFlushBelow) {
      ASSERT_EQ(y[i], 0.0f) << x[i];
      continue;
    }
    const double want = std::exp(static_cast<double>(x[i]));
    if (want > std::numeric_limits<float>::max()) continue;  // inf: checked by the caller
    const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
    const double ulps = std::abs(y[i] - want) / ulp;
    if (ulps > worst_ulps) worst_ulps = ulps, worst_x = x[i];
  }
  EXPECT_LE(worst_ulps, 3.0) << "at x = " << worst_x;
}

// The exp of cpu_naive, over its domain x <= 88.7.
TEST(SoftmaxExp, AccurateOverItsDomain) {
  expect_exp_accurate(softmax_exp, 88.7, {1e-30f, 0.34657359f, 88.72f});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> special = {0.0f, -kInf, -110.0f, -1e30f, 88.75f, nan};
  std::vector<float> out(special.size());
  softmax_exp(special.data(), out.data(), static_cast<std::int64_t>(special.size()));
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 0.0f);
  EXPECT_EQ(out[4], kInf);  // exp(88.75) > FLT_MAX
  EXPECT_TRUE(std::isnan(out[5]));
}

// The exp of cpu_fused's passes, over its domain x <= 0: as accurate, and
// the same flush and NaN (its 2^n comes from other instructions on AVX2).
TEST(SoftmaxExp, NonpositiveAccurateOverItsDomain) {
  expect_exp_accurate(softmax_exp_nonpositive, 0.0, {-std::numeric_limits<float>::denorm_min()});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> special = {0.0f, -0.0f, -kInf, -110.0f, -1e30f, -std::numeric_limits<float>::max(), nan};
  std::vector<float> out(special.size());
  softmax_exp_nonpositive(special.data(), out.data(), static_cast<std::int64_t>(special.size()));
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 1.0f);
  for (std::size_t i = 2; i < 6; ++i) EXPECT_EQ(out[i], 0.0f) << special[i];
  EXPECT_TRUE(std::isnan(out[6]));
}

// The row-sum check of log-softmax scales with the row's magnitude
// (softmax_case.cpp): a log-softmax computed as x - fl(max + log(sum)) in
// fp32, as cuDNN's is, passes it on rows of +-1e4 (where its exp sums to
// 0.9996-0.9998), and the same formula with c off by 64 ulp more fails.
template <int ExtraUlps>
void log_softmax_by_offset(const SoftmaxArgs& a) {
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const float* x = a.x + r * a.cols;
    float* y = a.y + r * a.cols;
    float m = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < a.cols; ++j) m = std::max(m, x[j]);
    double s = 0.0;
    for (std::int64_t j = 0; j < a.cols; ++j) s += std::exp(static_cast<double>(x[j]) - m);
    float c = static_cast<float>(static_cast<double>(m) + std::log(s));  // rounded once to fp32
    for (int i = 0; i < ExtraUlps; ++i) c = std::nextafter(c, std::numeric_limits<float>::infinity());
    for (std::int64_t j = 0; j < a.cols; ++j) y[j] = x[j] - c;
  }
}

TEST(SoftmaxRowSums, LogSoftmaxBoundScalesWithTheRow) {
  const SoftmaxVariant offset{"cpu_offset", Device::cpu, plain<log_softmax_by_offset<0>>, 1e-5};
  const SoftmaxVariant off_by_64{"cpu_offset_off", Device::cpu, plain<log_softmax_by_offset<64>>, 1e-5};
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{3, 1000}, {2, 4097}, {2, 40000}}) {
    SoftmaxCase good(offset, SoftmaxKind::log_softmax, rows, cols, SoftmaxInput::large_magnitude);
    const auto result = good.validate();
    EXPECT_TRUE(result.ok) << rows << "x" << cols << ": " << result.summary();
    // Its rows do not sum to 1 within the plain tolerance: the bound matters.
    const auto y = good.output();
    double sum = 0.0;
    for (std::int64_t j = 0; j < cols; ++j) sum += std::exp(static_cast<double>(y[static_cast<std::size_t>(j)]));
    EXPECT_GT(std::abs(sum - 1.0), 1e-5) << rows << "x" << cols;
    SoftmaxCase bad(off_by_64, SoftmaxKind::log_softmax, rows, cols, SoftmaxInput::large_magnitude);
    const auto wrong = bad.validate();
    EXPECT_FALSE(wrong.ok) << rows << "x" << cols;
    EXPECT_NE(wrong.summary().find("do not sum to 1"), std::string::npos) << wrong.summary();
  }
}

// cpu_fused shares rows (or, with fewer rows than threads, pieces of a row)
// between threads: the same answer at any thread count.
TEST(SoftmaxFused, AnyThreadCount) {
  const int saved = omp_get_max_threads();
  for (int threads : {1, 3, 5}) {
    omp_set_num_threads(threads);
    for (SoftmaxKind kind : {SoftmaxKind::softmax, SoftmaxKind::log_softmax}) {
      const auto list = variants(kind);
      const auto fused_at = std::find_if(list.begin(), list.end(), [](const auto* v) { return v->name == "cpu_fused"; });
      ASSERT_NE(fused_at, list.end());
      const SoftmaxVariant* fused = *fused_at;
      for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{1, 1000}, {2, 1000}, {4, 33}, {1, 70001},
                                       {3, 7}, {1, 5}}) {
        for (SoftmaxInput input : {SoftmaxInput::random, SoftmaxInput::masked, SoftmaxInput::nan}) {
          SoftmaxCase c(*fused, kind, rows, cols, input, 1, 0);
          const auto result = c.validate();
          EXPECT_TRUE(result.ok) << threads << " threads, rows " << rows << ", cols " << cols << ", "
                                 << softmax_input_name(input) << ": " << result.summary();
        }
      }
    }
  }
  omp_set_num_threads(saved);
}

#endif

}  // namespace
}  // namespace dlb
