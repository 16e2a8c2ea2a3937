#!/usr/bin/env bash
# The A/A study and the fixtures of tests/test_compare.py, from real runs of
# the committed code. Run on a quiet machine, from a clean checkout:
#   tests/make_compare_fixtures.sh
# Six single-process runs of one binary (A/A) and three of a build with a
# planted 20% slowdown in daxpy/cpu_loop (-DDLB_PLANTED_SLOWDOWN=ON; the two
# binaries have the same code at the same addresses), 10 repetitions each,
# over a daxpy and roofline subset. Prints scripts/aa_study.py's tables for
# single runs and for runs pooled three per side, and writes the fixtures:
# compare_aa_base.json (A/A runs 1-3 merged), compare_aa_new.json (4-6),
# compare_planted.json (the three planted runs).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -n $(git status --porcelain --untracked-files=no) ]]; then
  echo "make_compare_fixtures: commit first: fixtures must come from committed code" >&2
  exit 1
fi
filter='^(daxpy/cpu_(loop|omp|eigen)/n:(1024|16384|262144|4194304|33554432)|roofline/cpu_(copy|triad|fma))/'
flags=(--benchmark_filter="$filter" --benchmark_repetitions=10 --benchmark_min_time=0.1 --benchmark_out_format=json)

scripts/build
cmake -S . -B build-planted -DCMAKE_BUILD_TYPE=Release -DDLB_PLANTED_SLOWDOWN=ON -DDLB_TESTS=OFF
cmake --build build-planted -j "$(nproc)" --target bench

runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
# Interleaved, so that a slow spell of the machine does not fall on one side only.
for i in 1 2 3; do
  build/bench "${flags[@]}" --benchmark_out="$runs/aa$i.json" >/dev/null
  build-planted/bench "${flags[@]}" --benchmark_out="$runs/planted$i.json" >/dev/null
  build/bench "${flags[@]}" --benchmark_out="$runs/aa$((i + 3)).json" >/dev/null
done

py=.venv/bin/python
echo "== single runs"
$py scripts/aa_study.py "$runs"/aa?.json --pool 1 --planted "$runs"/planted1.json
echo "== pooled three per side"
$py scripts/aa_study.py "$runs"/aa?.json --pool 3 --planted "$runs"/planted?.json
$py scripts/merge_runs.py "$runs"/aa1.json "$runs"/aa2.json "$runs"/aa3.json -o tests/data/compare_aa_base.json
$py scripts/merge_runs.py "$runs"/aa4.json "$runs"/aa5.json "$runs"/aa6.json -o tests/data/compare_aa_new.json
$py scripts/merge_runs.py "$runs"/planted?.json -o tests/data/compare_planted.json
ls -la tests/data/compare_*.json
