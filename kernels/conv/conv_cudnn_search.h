// The choice among cuDNN's forward algorithms that gpu_cudnn_find, the fp32
// networks and the GPU training step make (cudnn_search_fp32 in
// conv_cudnn.cpp), as plain logic without cuDNN: which of the heuristic's
// list entries are timed and why the others are not, the order the timed
// calls go in, and the pick. Built on the CPU too, so that its unit test
// (test_conv) runs without a GPU.
//
// Why it is shaped this way (the H200 run of 2026-11-27, finding 7, and the
// H100 run's finding 5): the old search timed each candidate's calls back to
// back, one candidate after the other in the heuristic's order, without the
// stream hold the benchmark puts ahead of each timed call. It picked
// IMPLICIT_GEMM on all six resnet20 batch-64 shapes, 1.22-1.56x slower than
// the heuristic's IMPLICIT_PRECOMP_GEMM as the case times them. Whatever
// the search timed besides the kernels (the host's issuing of each call,
// a GPU clock still rising while the first candidate in the list, the
// heuristic's own pick, was timed) was not what the case times. Now:
//   - each timed call is timed as the case times it (a hold ahead of it,
//     events around the call alone), the median of several;
//   - the candidates take turns, round by round, after warm-up rounds, so
//     a drift during the search (clocks, a neighbour on the GPU) falls on
//     all of them alike instead of on the first;
//   - the heuristic's own pick is always timed, and it stays the choice
//     unless another candidate is faster by more than kSearchMargin: a
//     search that cannot tell two candidates apart keeps cuDNN's pick;
//   - every entry keeps its median or the reason it was not timed
//     (search_log), which the conv case's label carries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dlb {

// How a list entry's math type bears on strict fp32.
enum class SearchMath { fma, default_math, tensor_op };

// One entry of cudnnGetConvolutionForwardAlgorithm_v7's list (cuDNN lists
// an algorithm once per math type), with what the search learns about it.
struct SearchEntry {
  int algo = 0;                // cudnnConvolutionFwdAlgo_t
  std::string name;            // "IMPLICIT_PRECOMP_GEMM"
  bool listed_ok = true;       // the list's status was CUDNN_STATUS_SUCCESS
  std::string listed_status;   // the list's status, where not
  SearchMath math = SearchMath::fma;
  double tolerance = 1e-5;     // cudnn_fp32_tolerance on this filter
  bool workspace_ok = true;    // cudnnGetConvolutionForwardWorkspaceSize succeeded
  std::size_t workspace_bytes = 0;
  // Set by screen_search_entries: empty for a candidate to time, else why not.
  std::string skip;
  std::vector<double> seconds;  // each timed call (not the warm-up rounds)
  double median = -1;           // of `seconds`; -1: not timed
};

// Timed calls: rounds over all candidates, the first kSearchWarmupRounds
// untimed (their calls run, their times are dropped).
inline constexpr int kSearchWarmupRounds = 2;
inline constexpr int kSearchTimedRounds = 7;
// The heuristic's pick stays the choice unless another candidate's median
// is below its median by more than this fraction.
inline constexpr double kSearchMargin = 0.02;

// Marks each entry's skip reason: a status other than success, tensor-op
// math (TF32, not strict fp32; an entry of default math is kept: the call
// runs with the convolution descriptor's FMA math whatever the entry says),
// a tolerance above 1e-5, an algorithm already kept (the same call: the
// descriptor, not the entry, sets the math), a workspace query that failed,
// a workspace above `workspace_limit`. Returns the index of the heuristic's
// own pick: the first entry kept, as prepare_conv_cudnn_heuristic takes it
// (-1 if none is).
//
// With `tf32` (the search of a descriptor with CUDNN_TENSOR_OP_MATH: the
// network row gpu_cudnn_graph_tf32) tensor-op entries are kept, and so are
// the others: the descriptor permits TF32 for whatever algorithm runs, so
// an FMA entry of an algorithm is the same call as its tensor-op entry (the
// first listed is kept), and an algorithm without TF32 kernels runs in
// fp32, inside the TF32 bound. This is the choice PyTorch makes with
// allow_tf32 (every algorithm, the descriptor permitting TF32). The 1e-5
// screen stays: a transform that already rounds past the fp32 bound would
// add its error to TF32's.
int screen_search_entries(std::vector<SearchEntry>& entries, std::size_t workspace_limit, bool tf32 = false);

// Times every kept entry: `time_call(i)` runs entry i once and returns its
// seconds, as the case times a call. Rounds over the kept entries in list
// order, kSearchWarmupRounds untimed, then kSearchTimedRounds timed; sets
// `seconds` and `median` of each. A call that throws propagates.
void time_search_entries(std::vector<SearchEntry>& entries, const std::function<double(std::size_t)>& time_call);

// The choice: the heuristic's pick (`heuristic`, as screen_search_entries
// returned it) unless the fastest timed entry's median is below its median
// by more than kSearchMargin; -1 if nothing was timed.
int pick_search_entry(const std::vector<SearchEntry>& entries, int heuristic);

// One line per entry, for the case's label and the log: "IMPLICIT_PRECOMP_GEMM
// 18.1 us (heuristic) chosen; IMPLICIT_GEMM 24.5 us; FFT skipped: workspace
// 34604736 B over the limit 1000 B; ..."
std::string search_log(const std::vector<SearchEntry>& entries, int heuristic, int chosen);

}  // namespace dlb
