#include "kernels/conv/conv_cudnn_search.h"

#include <algorithm>
#include <cstdio>

namespace dlb {

int screen_search_entries(std::vector<SearchEntry>& entries, std::size_t workspace_limit, bool tf32) {
  int heuristic = -1;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    SearchEntry& e = entries[i];
    e.skip.clear();
    if (!e.listed_ok) {
      e.skip = "listed as " + (e.listed_status.empty() ? std::string("not supported") : e.listed_status);
    } else if (e.math == SearchMath::tensor_op && !tf32) {
      e.skip = "tensor-op math (TF32)";
    } else if (e.tolerance > 1e-5) {
      e.skip = "above the fp32 bound on this filter";
    } else {
      for (std::size_t j = 0; j < i; ++j) {
        if (entries[j].algo == e.algo && entries[j].skip.empty()) {
          e.skip = "listed again (entry " + std::to_string(j) + " is the same call)";
          break;
        }
      }
      if (e.skip.empty()) {
        if (!e.workspace_ok) {
          e.skip = "workspace query not supported";
        } else if (e.workspace_bytes > workspace_limit) {
          e.skip = "workspace " + std::to_string(e.workspace_bytes) + " B over the limit " +
                   std::to_string(workspace_limit) + " B";
        }
      }
    }
    if (e.skip.empty() && heuristic < 0) heuristic = static_cast<int>(i);
  }
  return heuristic;
}

void time_search_entries(std::vector<SearchEntry>& entries, const std::function<double(std::size_t)>& time_call) {
  std::vector<std::size_t> kept;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    entries[i].seconds.clear();
    entries[i].median = -1;
    if (entries[i].skip.empty()) kept.push_back(i);
  }
  for (int round = 0; round < kSearchWarmupRounds + kSearchTimedRounds; ++round) {
    for (const std::size_t i : kept) {
      const double s = time_call(i);
      if (round >= kSearchWarmupRounds) entries[i].seconds.push_back(s);
    }
  }
  for (const std::size_t i : kept) {
    std::vector<double> sorted = entries[i].seconds;
    std::sort(sorted.begin(), sorted.end());
    entries[i].median = sorted[sorted.size() / 2];
  }
}

int pick_search_entry(const std::vector<SearchEntry>& entries, int heuristic) {
  int fastest = -1;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].median < 0) continue;
    if (fastest < 0 || entries[i].median < entries[static_cast<std::size_t>(fastest)].median)
      fastest = static_cast<int>(i);
  }
  if (heuristic < 0 || entries[static_cast<std::size_t>(heuristic)].median < 0) return fastest;
  const double h = entries[static_cast<std::size_t>(heuristic)].median;
  return entries[static_cast<std::size_t>(fastest)].median < (1.0 - kSearchMargin) * h ? fastest : heuristic;
}

std::string search_log(const std::vector<SearchEntry>& entries, int heuristic, int chosen) {
  std::string out;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const SearchEntry& e = entries[i];
    if (!out.empty()) out += "; ";
    out += e.name;
    if (e.math == SearchMath::default_math) out += " (default math)";
    if (e.math == SearchMath::tensor_op) out += " (tensor-op math)";
    if (!e.skip.empty()) {
      out += " skipped: " + e.skip;
      continue;
    }
    char median[32];
    std::snprintf(median, sizeof median, " %.1f us", e.median * 1e6);
    out += median;
    if (static_cast<int>(i) == heuristic) out += " (heuristic)";
    if (static_cast<int>(i) == chosen) out += " chosen";
  }
  return out;
}

}  // namespace dlb
