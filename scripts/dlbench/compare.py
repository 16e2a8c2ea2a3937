"""Deciding, per case, whether NEW is slower than BASE, from the repetitions.

Per case present in both runs, with times t (seconds per call, one per
repetition; optionally normalized by the same run's roofline ceiling):
  change    = median(t_new) / median(t_base) - 1
  p         = two-sided Mann-Whitney U test of t_base against t_new
  threshold = max(min_effect, noise_factor * noise), where noise is the
              larger of the two sides' relative median absolute deviation
              (MAD / median): a case that jitters by 5% between repetitions
              must move by more than a quiet one before it counts.
  slower  if p < alpha and change >  threshold
  faster  if p < alpha and change < -threshold
  same    otherwise
Other verdicts: new (only in NEW, or errored in BASE), gone (only in BASE),
errored (skipped with an error in NEW). A regression is `slower`, or
`errored` where BASE measured the case. With normalization the roofline
ceilings are compared as measured and a slower ceiling is reported but is
not a regression (it says the machine is slower).

A case that was noisy on either side (dlbench.quality: another process
competed for the CPUs, the hypervisor stole time, the memory ceiling moved
around it), or whose bracketed ceiling differs between the two runs by more
than NOISY_RUN_DRIFT (the two runs met different machines: on the EPYC VMs
the memory bandwidth of both cores switches between about 58 and 105 GB/s
for minutes at a time), keeps its verdict but is marked `noisy`, and a
noisy `slower` is not a regression: it is a reason to rerun (compare.py
exits 3 when that is all it found).

Normalizations: `roofline` divides each time by the median time of the
matching ceiling case of the same run (measured minutes away); `bracket`
uses, for the memory-bound CPU cases, the ceiling measured right before and
after each repetition (1 / frac_of_ceiling), and raw times for the rest.

Why both tests: on a shared machine two runs of identical code differ
systematically by a few percent (page placement, frequency, neighbours), so
with 10 repetitions a rank test alone calls most cases different; the effect
threshold says how large a difference matters, the rank test that it is not
chance. The repetitions of one process do not see how far a whole process
can be off (up to 13% on a case here), so each side should pool several
processes (DLB_PROCESSES=3). The defaults come from A/A runs of this machine
(docs/methodology.md, "Regression statistics"; scripts/aa_study.py reproduces them
from the committed fixtures): pooled three processes a side, 0 of 20 A/A
comparisons call a case slower and the planted 20% slowdown is found in
100 of 100 case comparisons with nothing else called slower.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from dlbench.names import split_name
from dlbench.quality import NOISY_RUN_DRIFT, case_reason, quality
from dlbench.results import Case, Results, relative_mad, repetitions

DEFAULT_ALPHA = 0.01
DEFAULT_MIN_EFFECT = 0.10
DEFAULT_NOISE_FACTOR = 3.0
# cpu_microarchitecture: CPUID's family/model, for VMs whose model string is
# as generic as "AMD EPYC" (two CPUs 2x apart in FMA rate both said so).
MACHINE_KEYS = ("cpu_model", "cpu_microarchitecture", "cpu_cores", "gpu_name")

# Which roofline ceiling normalizes a case: by device and by what it counts.
CEILINGS = {
    ("cpu", "bytes"): "roofline/cpu_triad",
    ("cpu", "flops"): "roofline/cpu_fma",
    ("gpu", "bytes"): "roofline/gpu_copy",
    ("gpu", "flops"): "roofline/gpu_fma",
}

VERDICT_ORDER = {"errored": 0, "slower": 1, "faster": 2, "same": 3, "new": 4, "gone": 5}


@dataclass
class Verdict:
    name: str
    verdict: str
    change: float | None = None  # relative change of the median, +0.2 = 20% slower
    p_value: float | None = None
    threshold: float | None = None
    base_median: float | None = None  # seconds per call (or ratio to the ceiling if normalized)
    new_median: float | None = None
    base_repetitions: int = 0
    new_repetitions: int = 0
    regression: bool = False
    noisy: str = ""  # why BASE or NEW measured this case on a disturbed machine
    rerun: bool = False  # a regression but for the noise: measure again
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


class CompareError(Exception):
    """Inputs that cannot be compared (exit code 2)."""


def processes(results: Results) -> int:
    """How many processes the run pools (scripts/merge_runs.py); 1 for a plain run."""
    return int(results.context.get("processes", 1))


def machine_of(results: Results) -> dict[str, str]:
    return {k: str(results.context.get(k, "?")) for k in MACHINE_KEYS}


def check_machines(base: Results, new: Results, cross_machine: bool) -> str | None:
    """None if the machines match; the difference as text otherwise (an error
    unless cross_machine)."""
    a, b = machine_of(base), machine_of(new)
    if a == b:
        return None
    diff = ", ".join(f"{k}: {a[k]!r} vs {b[k]!r}" for k in MACHINE_KEYS if a[k] != b[k])
    uarch = (a["cpu_microarchitecture"], b["cpu_microarchitecture"])
    if "?" in uarch and uarch[0] != uarch[1]:
        diff += " ('?': a run from before bench recorded the CPU's family and model, so the CPU cannot be confirmed)"
    if not cross_machine:
        raise CompareError(f"runs from different machines ({diff}); times are comparable only on one "
                           "machine. Pass --cross-machine to compare anyway.")
    return diff


def _ceiling_name(case: Case) -> str | None:
    if case.op == "roofline":
        return None  # the ceilings themselves are compared as measured
    kind = "bytes" if case.values("bytes_per_second") else "flops"
    return CEILINGS.get((case.device, kind))


NORMALIZATIONS = ("roofline", "bracket")


def times(results: Results, case: Case, normalize: str | None) -> list[float]:
    """Per-repetition seconds per call; normalized: divided by the median time
    of the matching ceiling of the same run (roofline), or, for bracketed
    cases, 1 / frac_of_ceiling of each repetition (bracket)."""
    t = case.seconds()
    if not normalize:
        return t
    if normalize not in NORMALIZATIONS:
        raise CompareError(f"unknown normalization {normalize!r} (known: {', '.join(NORMALIZATIONS)})")
    if normalize == "bracket":
        frac = case.values("frac_of_ceiling")
        return [1.0 / f for f in frac] if frac and all(f > 0 for f in frac) else t
    ceiling_name = _ceiling_name(case)
    if ceiling_name is None:
        return t
    ceiling = next((c for c in results.cases.values() if c.name.startswith(ceiling_name)), None)
    if ceiling is None or ceiling.error is not None or not ceiling.runs:
        raise CompareError(f"{results.path}: --normalize roofline needs {ceiling_name} in the run "
                           f"(for {case.name})")
    return [x / ceiling.median_seconds() for x in t]


def ceiling_moved(base: Case, new: Case) -> str | None:
    """Why the machine around this case differs between the runs, or None:
    its ceiling (the bracket, or the case itself for a roofline memory
    ceiling) moved by more than NOISY_RUN_DRIFT."""
    key = "ceiling_bytes_per_second" if base.values("ceiling_bytes_per_second") else (
        "bytes_per_second" if base.op == "roofline" else None)
    if key is None:
        return None
    a, b = base.median(key), new.median(key)
    if not a or not b or abs(b / a - 1.0) <= NOISY_RUN_DRIFT:
        return None
    return f"the memory ceiling differs between the runs: {a / 1e9:.0f} vs {b / 1e9:.0f} GB/s"


def decide(name: str, base_t: list[float], new_t: list[float], alpha: float, min_effect: float,
           noise_factor: float) -> Verdict:
    v = Verdict(name=name, verdict="same", base_repetitions=len(base_t), new_repetitions=len(new_t))
    v.base_median, v.new_median = statistics.median(base_t), statistics.median(new_t)
    v.change = v.new_median / v.base_median - 1.0
    v.threshold = max(min_effect, noise_factor * max(relative_mad(base_t), relative_mad(new_t)))
    if len(base_t) < 2 or len(new_t) < 2:
        v.note = "one repetition: no test possible"
        return v
    from scipy.stats import mannwhitneyu  # here: scipy takes most of a second to import

    v.p_value = float(mannwhitneyu(base_t, new_t, alternative="two-sided").pvalue)
    if v.p_value < alpha and v.change > v.threshold:
        v.verdict, v.regression = "slower", True
    elif v.p_value < alpha and v.change < -v.threshold:
        v.verdict = "faster"
    return v


def compare(base: Results, new: Results, alpha: float = DEFAULT_ALPHA, min_effect: float = DEFAULT_MIN_EFFECT,
            noise_factor: float = DEFAULT_NOISE_FACTOR, normalize: str | None = None) -> list[Verdict]:
    names = sorted(set(base.cases) | set(new.cases))
    common = set(base.cases) & set(new.cases)
    if not common:
        raise CompareError(f"no cases in common between {base.path} and {new.path}")
    out = []
    for name in names:
        b, n = base.cases.get(name), new.cases.get(name)
        if b is None:
            out.append(Verdict(name=name, verdict="new", new_repetitions=len(n.runs)))
        elif n is None:
            out.append(Verdict(name=name, verdict="gone", base_repetitions=len(b.runs)))
        elif n.error is not None:
            fine_before = b.error is None and bool(b.runs)
            out.append(Verdict(name=name, verdict="errored", regression=fine_before,
                               base_repetitions=len(b.runs),
                               note=n.error + ("" if fine_before else " (errored in BASE too)")))
        elif b.error is not None or not b.runs:
            out.append(Verdict(name=name, verdict="new", new_repetitions=len(n.runs),
                               note="errored in BASE: " + (b.error or "no runs")))
        else:
            v = decide(name, times(base, b, normalize), times(new, n, normalize), alpha, min_effect, noise_factor)
            if normalize and n.op == "roofline" and v.verdict == "slower":
                # The ceilings are what the other cases are divided by: a
                # slower ceiling is a slower machine, not slower code.
                v.regression = False
                v.note = "ceiling: the machine is slower, not the code"
            reasons = [f"{side} {why}" for side, c in (("BASE", b), ("NEW", n)) if (why := case_reason(c))]
            if (moved := ceiling_moved(b, n)) is not None:
                reasons.append(moved)
            v.noisy = "; ".join(reasons)
            if v.noisy and v.regression:
                v.regression, v.rerun = False, True
                v.note = "noisy: rerun before believing it"
            out.append(v)
    out.sort(key=lambda v: (VERDICT_ORDER[v.verdict], -(v.change or 0.0) if v.verdict != "faster" else (v.change or 0.0), v.name))
    return out


# The command line of a comparison, shared by scripts/compare.py (two files)
# and scripts/results compare/check (two runs of the results store).

def add_options(parser) -> None:
    """The options of the rule and the report (everything but the two runs)."""
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                        help="significance level of the Mann-Whitney U test (default %(default)s)")
    parser.add_argument("--min-effect", type=float, default=DEFAULT_MIN_EFFECT,
                        help="smallest relative change of the median that counts (default %(default)s)")
    parser.add_argument("--noise-factor", type=float, default=DEFAULT_NOISE_FACTOR,
                        help="the change must also exceed this many relative MADs (default %(default)s)")
    parser.add_argument("--normalize", choices=list(NORMALIZATIONS),
                        help="roofline: divide each case's time by its run's matching roofline ceiling first; "
                             "bracket: compare memory-bound CPU cases by their bracketed frac_of_ceiling")
    parser.add_argument("--cross-machine", action="store_true", help="compare runs from different machines")
    parser.add_argument("--json", type=Path, help="write the verdicts as JSON here")
    parser.add_argument("--gone", action="store_true",
                        help="list every case of BASE that NEW lacks (default: their count per family)")


def fmt_time(v: float | None, normalized: bool) -> str:
    if v is None:
        return "-"
    if normalized:
        return f"{v:.4g}x"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if v >= scale:
            return f"{v / scale:.4g} {unit}"
    return f"{v / 1e-9:.3g} ns"


def table(verdicts, normalized: bool) -> str:
    rows = [("verdict", "change", "p", "threshold", "base", "new", "reps", "case")]
    for v in verdicts:
        rows.append((
            v.verdict + (" !" if v.regression else "") + (" (noisy)" if v.noisy else ""),
            f"{v.change:+.1%}" if v.change is not None else "-",
            f"{v.p_value:.2g}" if v.p_value is not None else "-",
            f"{v.threshold:.1%}" if v.threshold is not None else "-",
            fmt_time(v.base_median, normalized),
            fmt_time(v.new_median, normalized),
            f"{v.base_repetitions}/{v.new_repetitions}",
            v.name + (f"  ({v.note})" if v.note else "") + (f"  [noisy: {v.noisy}]" if v.noisy else ""),
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1] for r in rows)


def gone_summary(gone) -> str:
    """'1235 cases of BASE not in NEW: conv 700, gemm 300, ...': the gone rows by family, largest first."""
    per: dict[str, int] = {}
    for v in gone:
        op = split_name(v.name).op
        per[op] = per.get(op, 0) + 1
    families = ", ".join(f"{op} {n}" for op, n in sorted(per.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{len(gone)} case{'s' if len(gone) != 1 else ''} of BASE not in NEW (gone): {families}"


def report(base: Results, new: Results, base_label: str, new_label: str, args, prog: str) -> int:
    """Compares, prints the table and the machine states, writes --json;
    returns the exit code: 0 no regression, 1 regression, 2 bad input
    (message on stderr, prefixed with `prog`), 3 only noisy slowdowns."""
    try:
        diff = check_machines(base, new, args.cross_machine)
        normalized = args.normalize is not None
        verdicts = compare(base, new, args.alpha, args.min_effect, args.noise_factor, args.normalize)
    except CompareError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2

    print(f"BASE {base_label} (commit {str(base.context.get('git_commit', '?'))[:12]})")
    print(f"NEW  {new_label} (commit {str(new.context.get('git_commit', '?'))[:12]})")
    for label, r in (("BASE", base), ("NEW", new)):
        print(f"{label} machine: {quality(r).summary()}")
    if diff:
        print(f"CROSS-MACHINE comparison (--cross-machine): {diff}")
    for label, r in (("BASE", base), ("NEW", new)):
        if repetitions(r) < 2:
            print(f"warning: {label} has one repetition per case: run with --benchmark_repetitions=10 "
                  "for a verdict; every case is `same` without repetitions", file=sys.stderr)
        elif processes(r) < 2:
            print(f"warning: {label} is one process: a whole process can be off by 10% or more on a case "
                  "here, which its repetitions do not show; pool three (DLB_PROCESSES=3) for a verdict "
                  "without false alarms", file=sys.stderr)
    print(f"rule: slower/faster when p < {args.alpha} (Mann-Whitney U, two-sided) and |change| > "
          f"max({args.min_effect:.0%}, {args.noise_factor:g} x relative MAD)"
          + {None: "", "roofline": "; times normalized by the run's roofline ceiling",
             "bracket": "; memory-bound CPU cases compared by their bracketed fraction of the ceiling"}[args.normalize])
    print()
    # A run of a few families against a full one would list every other case
    # as gone (1,235 rows for a new machine's first check): a count per family
    # instead, unless asked.
    gone = [v for v in verdicts if v.verdict == "gone"]
    shown = verdicts if getattr(args, "gone", False) else [v for v in verdicts if v.verdict != "gone"]
    print(table(shown, normalized))
    if gone and shown is not verdicts:
        print()
        print(gone_summary(gone) + " (--gone lists them)")
    counts = {}
    for v in verdicts:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    regressions = [v for v in verdicts if v.regression]
    rerun = [v for v in verdicts if v.rerun]
    print()
    print(", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: VERDICT_ORDER[kv[0]]))
          + f"; {len(regressions)} regression(s)"
          + (f"; {len(rerun)} slower where the machine was noisy: rerun them" if rerun else ""))

    if args.json:
        args.json.write_text(json.dumps({
            "base": str(base_label), "new": str(new_label), "alpha": args.alpha, "min_effect": args.min_effect,
            "noise_factor": args.noise_factor, "normalize": args.normalize, "cross_machine": diff,
            "regressions": len(regressions), "noisy_slower": len(rerun),
            "base_machine": quality(base).summary(), "new_machine": quality(new).summary(),
            "cases": [v.as_dict() for v in verdicts]}, indent=1))
    if regressions:
        return 1
    return 3 if rerun else 0

