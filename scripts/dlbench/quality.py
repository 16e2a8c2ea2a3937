"""Can a run's figures be trusted? What the run recorded about the machine.

bench records, per repetition of every CPU case (bench/machine_state.h):
  contention  fraction of the time some runnable task waited for a CPU (PSI)
  steal       fraction of the vCPUs' time the hypervisor gave to other guests
  noisy       1 when contention, steal or the drift of the case's ceiling
              bracket passed its threshold
and, for memory-bound CPU cases, the ceiling measured right around the case
(ceiling_bytes_per_second, ceiling_drift, frac_of_ceiling).

A case is noisy when more than NOISY_SHARE of its repetitions are (its
median is then not the code's alone; one disturbed repetition in ten does
not move it), or, for a whole network's case (an inference pass or a
training step, ours or a peer's), when its slowest repetition took more than
NOISY_REPETITION_SPREAD longer than its fastest: the machine slowed under
the case while neither contention nor steal showed it (a neighbour on the
shared caches or the core's other thread), where no ceiling bracket
watches (these are compute-bound, or bound by caches no bracket measures).
A run is noisy when
  - a case is noisy, or
  - a roofline ceiling's repetitions spread by more than NOISY_CEILING_SPREAD
    (relative median absolute deviation: the machine moved while the
    ceiling was measured; one slow first repetition does not count), or
  - a bracketed ceiling moved by more than NOISY_RUN_DRIFT between the
    bracketed cases of the run that use it (max / min - 1 of their medians;
    the ceilings are told apart by the cases' labels, "vs roofline/cpu_copy"
    on all cores or on "1 thread"): bracketed
    ratios are still sound, but figures divided by a ceiling measured at
    another moment (every unbracketed case) are not.
Runs made before bench recorded these counters are `not recorded`, neither
clean nor noisy.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from dlbench.names import is_network_op
from dlbench.results import Case, Results, relative_mad

# Set from quiet and loaded runs of a 2-core EPYC VM (docs/methodology.md,
# "Noise and disturbance flags"): quiet runs stay under half of each.
NOISY_SHARE = 0.2  # bench/machine_state.h kNoisyShare
NOISY_CEILING_SPREAD = 0.05  # kNoisyCeilingSpread
NOISY_RUN_DRIFT = 0.10
# Slowest / fastest - 1 of a network's repetitions (ours or a peer's). On
# the 2-core Zen 3 VM, of the 59 network and peer cases of a quiet run
# (20261203T022139Z, in git at 6c2164a) none passed 16% and nine in ten
# stayed under 7%; a run whose own rows were 11-31% slower than that one's
# (20261202T220158Z, in git at 9ba2418) had 11 of 59 past 15% and 2 past
# 25%, and earlier runs had repetitions slowing one after another by 32%
# and 2x (docs/methodology.md).
NOISY_REPETITION_SPREAD = 0.25


def _spread(values: list[float]) -> float:
    return max(values) / min(values) - 1.0 if values and min(values) > 0 else 0.0


def case_reason(case: Case) -> str | None:
    """Why this case's figures are not to be trusted, or None."""
    if case.error is not None or not case.runs:
        return None
    reasons = []
    flags = case.values("noisy")
    if flags and sum(f > 0 for f in flags) > NOISY_SHARE * len(flags):
        parts = []
        for key, label in (("contention", "contention"), ("steal", "steal")):
            vals = case.values(key)
            if vals:
                parts.append(f"{label} up to {max(vals):.0%}")
        drift = [abs(v) for v in case.values("ceiling_drift")]
        if drift:
            parts.append(f"ceiling drift up to {max(drift):.0%}")
        reasons.append(f"{sum(f > 0 for f in flags)} of {len(flags)} repetitions noisy ({', '.join(parts)})")
    if case.op == "roofline":
        rates = case.values("bytes_per_second") or case.values("flops")
        if len(rates) > 1 and relative_mad(rates) > NOISY_CEILING_SPREAD:
            reasons.append(f"repetitions spread {relative_mad(rates):.0%} (relative MAD)")
    elif is_network_op(case.op):
        times = case.seconds()
        if len(times) >= 3 and _spread(times) > NOISY_REPETITION_SPREAD:
            reasons.append(f"repetitions spread {_spread(times):.0%} (slowest over fastest)")
    return "; ".join(reasons) or None


@dataclass
class Quality:
    recorded: bool  # the run carries the counters
    reasons: list[str] = field(default_factory=list)
    noisy_cases: dict[str, str] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return self.recorded and not self.reasons

    def summary(self) -> str:
        if not self.recorded:
            return "not recorded (a run from before bench watched the machine)"
        if self.clean:
            return "clean"
        return "NOISY: " + "; ".join(self.reasons)


def quality(results: Results) -> Quality:
    cpu = [c for c in results.cases.values() if c.runs_on == "cpu" and c.runs]  # peers on the CPU too
    q = Quality(recorded=any(c.values("noisy") for c in cpu))
    if not q.recorded:
        return q
    for c in cpu:
        reason = case_reason(c)
        if reason:
            q.noisy_cases[c.name] = reason
    if q.noisy_cases:
        shown = sorted(q.noisy_cases)[:3]
        q.reasons.append(f"{len(q.noisy_cases)} of {len(cpu)} CPU cases noisy ("
                         + ", ".join(shown) + (", ..." if len(q.noisy_cases) > 3 else "") + ")")
    by_ceiling: dict[str, list[float]] = {}
    for c in cpu:
        if (m := c.median("ceiling_bytes_per_second")) is not None:
            by_ceiling.setdefault(str(c.runs[0].get("label", "")), []).append(m)
    for label, ceilings in sorted(by_ceiling.items()):
        if len(ceilings) > 1 and _spread(ceilings) > NOISY_RUN_DRIFT:
            q.reasons.append(f"the memory ceiling moved {_spread(ceilings):.0%} during the run "
                             f"({min(ceilings) / 1e9:.1f} to {max(ceilings) / 1e9:.1f} GB/s, {label})")
    return q


def warning(results: Results, file: str | None = None) -> str | None:
    """One line for every script that reads a run (plot.py, profile.py,
    placement.py, the dashboard): how many of its cases are flagged noisy and
    why, or None for a clean run (or one from before the recording). `file`
    is the results file to name for the details (default: the run's path). The
    rule is quality()'s; the reasons are summed up over the flagged cases."""
    q = quality(results)
    if not q.recorded or q.clean:
        return None
    cpu = [c for c in results.cases.values() if c.runs_on == "cpu" and c.runs]
    flagged = [c for c in cpu if c.name in q.noisy_cases]
    worst = []
    for key, label in (("contention", "CPU contention"), ("steal", "hypervisor steal")):
        vals = [v for c in flagged for v in c.values(key)]
        if vals and max(vals) > 0:
            worst.append(f"{label} up to {max(vals):.0%}")
    drift = [abs(v) for c in flagged for v in c.values("ceiling_drift")]
    if drift and max(drift) > 0:
        worst.append(f"ceiling drift up to {max(drift):.0%}")
    head = (f"{len(flagged)} of {len(cpu)} CPU cases flagged NOISY"
            + (f" ({', '.join(worst)})" if worst else "")) if flagged else "no case flagged"
    others = q.reasons[1:] if q.noisy_cases else q.reasons  # quality() puts the cases' reason first
    return (f"{results.path}: {head}" + (f"; {'; '.join(others)}" if others else "")
            + f": its figures are not the code's alone (scripts/quality.py {file or results.path} --cases says "
            "why, case by case)")


def warn(prog: str, results: Results) -> None:
    """warning()'s line on stderr, after the script's name, when there is one."""
    line = warning(results)
    if line:
        print(f"{prog}: warning: {line}", file=sys.stderr)
