#!/usr/bin/env bash
# Makes the fixtures of tests/test_compare.py from real runs of the committed
# code: two runs of one binary (A/A) and one run of a build with a planted 20%
# slowdown in daxpy/cpu_loop. Run on a quiet machine, from a clean checkout.
#   tests/make_compare_fixtures.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -n $(git status --porcelain --untracked-files=no) ]]; then
  echo "make_compare_fixtures: commit first: fixtures must come from committed code" >&2
  exit 1
fi
filter='^(daxpy/cpu_(loop|omp|eigen)/n:(1024|16384|262144|4194304|33554432)|roofline/cpu_(copy|triad|fma))/'
flags=(--benchmark_filter="$filter" --benchmark_repetitions=10 --benchmark_min_time=0.1 --benchmark_out_format=json)

scripts/build
cmake -S . -B build-planted -DCMAKE_BUILD_TYPE=Release -DDLB_PLANTED_SLOWDOWN=ON -DDLB_TESTS=OFF -DDLB_CUDA=OFF
cmake --build build-planted -j "$(nproc)" --target bench

build/bench "${flags[@]}" --benchmark_out=tests/data/compare_aa_base.json >/dev/null
build/bench "${flags[@]}" --benchmark_out=tests/data/compare_aa_new.json >/dev/null
build-planted/bench "${flags[@]}" --benchmark_out=tests/data/compare_planted.json >/dev/null
ls -la tests/data/compare_*.json
