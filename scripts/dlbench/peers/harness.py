"""What every peer case shares: the selection (--benchmark_filter), the check
against the reference before timing, the timing, the machine state around
each repetition, and the Google Benchmark JSON entries.

Timing, as bench does it:
  CPU   a steady clock around each single call, after a warm-up of at least
        WARMUP_CALLS calls and WARMUP_SECONDS (long enough for the BLAS
        threads of the float64 reference computed just before to stop
        spinning: OpenBLAS's busy-wait otherwise takes a core from the first
        repetition, which then reads as contention);
        calls are repeated until a repetition has lasted --benchmark_min_time;
        the repetition's time per call is its wall time over its calls.
        Each repetition records contention (PSI) and steal (/proc/stat) over
        its own window, and noisy past bench's thresholds
        (bench/machine_state.h), so scripts/quality.py judges peers as it
        judges our cases.
  GPU   CUDA events around each call on the current stream (torch.cuda.Event),
        after warm-up; for memory-bound cases a buffer twice the L2 is
        rewritten before each call (outside the events), as bench flushes L2.
A case's entry name ends in /real_time (CPU) or /manual_time (GPU), like
bench's, and --benchmark_filter is matched against the name with and
without that suffix."""

from __future__ import annotations

import math
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from dlbench.peers.descriptors import Problems
from dlbench.names import split_name

WARMUP_CALLS = 3
WARMUP_SECONDS = 0.3
NOISY_CONTENTION = 0.05  # bench/machine_state.h kNoisyContention
NOISY_STEAL = 0.05  # kNoisySteal
MAX_LISTED = 10  # mismatches listed in an error message, as reference/compare.cpp


class PeerUnavailable(Exception):
    """A peer's package (or device) is not there: the peer is skipped with one line, not a traceback."""


class Selection:
    """--benchmark_filter as Google Benchmark takes it: a regular expression
    searched in the case name, a leading '-' selecting what it does not match."""

    def __init__(self, pattern: str):
        self.negative = pattern.startswith("-")
        self.regex = re.compile(pattern[1:] if self.negative else pattern)  # re.error: the caller says so

    def __call__(self, name: str, suffix: str) -> bool:
        hit = bool(self.regex.search(name)) or bool(self.regex.search(f"{name}/{suffix}"))
        return hit != self.negative


# ---- checks -----------------------------------------------------------------------------------------------


@dataclass
class Check:
    ok: bool
    max_rel_err: float
    tolerance: float
    mismatches: int
    checked: int
    first: str = ""

    def summary(self) -> str:
        text = (f"{'ok' if self.ok else 'WRONG RESULT'}: max_rel_err {self.max_rel_err:.3g} "
                f"(tolerance {self.tolerance:.3g}), {self.mismatches} of {self.checked} elements off")
        return text + (f": {self.first}" if self.first else "")


def compare(out, ref, tolerance: float, block: int | None = None) -> Check:
    """reference/compare.cpp's comparison: each block (a row, or the whole
    array) scaled by its largest finite |ref|; an element is off when
    |out - ref| / scale > tolerance; a non-finite ref must be matched (NaN by
    NaN, an infinity by the same infinity); a NaN out is always off."""
    out = np.asarray(out, dtype=np.float64).reshape(-1)
    ref = np.asarray(ref, dtype=np.float64).reshape(-1)
    if out.shape != ref.shape:
        return Check(False, math.inf, tolerance, ref.size, ref.size, f"{out.size} elements, expected {ref.size}")
    if out.size == 0:
        return Check(True, 0.0, tolerance, 0, 0)
    block = block or out.size
    o, r = out.reshape(-1, block), ref.reshape(-1, block)
    finite = np.isfinite(r)
    scale = np.where(finite, np.abs(r), 0.0).max(axis=1, keepdims=True)
    scale[scale == 0] = 1.0
    with np.errstate(invalid="ignore"):
        err = np.abs(o - r) / scale
        off = np.where(finite, ~(err <= tolerance), ~(np.where(np.isnan(r), np.isnan(o), o == r)))
    finite_err = err[finite]
    max_err = 0.0
    if finite_err.size:
        max_err = math.inf if np.isnan(finite_err).any() else float(finite_err.max())
    bad = np.flatnonzero(off.reshape(-1))
    first = "; ".join(f"[{i}] got {out[i]:.9g} want {ref[i]:.9g}" for i in bad[:MAX_LISTED])
    return Check(bad.size == 0, max_err, tolerance, int(bad.size), int(out.size), first)


# ---- timing -----------------------------------------------------------------------------------------------


@dataclass
class Repetition:
    calls: int
    seconds: float  # the calls' time together (CPU: wall; GPU: the events')
    singles: list[float] = field(default_factory=list)  # each call's seconds
    contention: float | None = None
    steal: float | None = None


def _sample() -> tuple[float, float | None, float | None, float | None]:
    """(now, PSI cpu 'some' total in us, steal ticks, all ticks): bench's sample_machine()."""
    now = time.monotonic()
    pressure = steal = total = None
    try:
        with open("/proc/pressure/cpu") as f:
            line = f.readline()
        if line.startswith("some "):
            pressure = float(line.split("total=")[1])
    except (OSError, IndexError, ValueError):
        pass
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        if fields and fields[0] == "cpu":
            ticks = [float(v) for v in fields[1:]]
            total, steal = sum(ticks), ticks[7] if len(ticks) > 7 else None
    except (OSError, ValueError):
        pass
    return now, pressure, steal, total


def _disturbance(before, after) -> tuple[float | None, float | None]:
    wall_us = (after[0] - before[0]) * 1e6
    contention = None
    if before[1] is not None and after[1] is not None and wall_us > 0:
        contention = (after[1] - before[1]) / wall_us
    steal = None
    if before[2] is not None and after[2] is not None:
        ticks = after[3] - before[3]
        steal = (after[2] - before[2]) / ticks if ticks > 0 else 0.0
    return contention, steal


def time_cpu(run: Callable[[], object], repetitions: int, min_time: float) -> list[Repetition]:
    start = time.perf_counter()
    calls = 0
    while calls < WARMUP_CALLS or time.perf_counter() - start < WARMUP_SECONDS:
        run()
        calls += 1
    reps = []
    for _ in range(repetitions):
        singles = []
        before = _sample()
        start = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            run()
            singles.append(time.perf_counter() - t0)
            if time.perf_counter() - start >= min_time:
                break
        seconds = time.perf_counter() - start
        contention, steal = _disturbance(before, _sample())
        reps.append(Repetition(len(singles), seconds, singles, contention, steal))
    return reps


def time_gpu(run: Callable[[], object], repetitions: int, min_time: float,
             flush: Callable[[], object] | None = None) -> list[Repetition]:
    import torch

    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(WARMUP_CALLS):
        run()
    torch.cuda.synchronize()
    reps = []
    for _ in range(repetitions):
        singles = []
        wall = time.perf_counter()
        while sum(singles) < min_time and time.perf_counter() - wall < 20 * min_time + 1.0:
            if flush is not None:
                flush()
            start.record()
            run()
            stop.record()
            stop.synchronize()
            singles.append(start.elapsed_time(stop) * 1e-3)
        reps.append(Repetition(len(singles), sum(singles), singles))
    return reps


def l2_flusher():
    """A callable that rewrites a buffer twice the GPU's L2 (what bench's Timing.flush_l2 does)."""
    import torch

    size = 2 * max(int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0)), 1 << 20)
    scratch = torch.empty(size, dtype=torch.uint8, device="cuda")
    return lambda: scratch.fill_(1)


# ---- framework settings ---------------------------------------------------------------------------------


def set_fp32_math(torch, tf32: bool) -> str:
    """Pins what PyTorch may do with fp32 convolutions and matrix products on
    the GPU, and says what is in effect (for the label). tf32=False: strict
    fp32, TF32 off for cuDNN's convolutions (forward and both backward
    passes) and for cuBLAS; tf32=True: PyTorch's defaults as it ships them,
    TF32 allowed for cuDNN's convolutions, not for matrix products
    (torch.backends.cuda.matmul.allow_tf32 is False by default). In both,
    fp16 products accumulate in fp32 (no reduced-precision reduction).

    PyTorch 2.9 added per-operator precisions (torch.backends.cudnn.conv.
    fp32_precision, torch.backends.cuda.matmul.fp32_precision: 'ieee',
    'tf32', or 'none', which defers to the backend's setting). The legacy
    flags set them too (allow_tf32 = False writes 'none' for conv, not
    'ieee'), so they are read back, and a 'tf32' left where strict fp32 was
    asked for (or the reverse) is set outright: the mode computes what its
    name says whichever API the installed PyTorch reads."""
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    conv = getattr(torch.backends.cudnn, "conv", None)
    matmul = torch.backends.cuda.matmul
    if conv is not None and hasattr(conv, "fp32_precision") and (conv.fp32_precision == "tf32") != tf32:
        conv.fp32_precision = "tf32" if tf32 else "ieee"
    if getattr(matmul, "fp32_precision", "ieee") == "tf32":
        matmul.fp32_precision = "ieee"
    return "TF32 on for convolutions (PyTorch's default), off for matrix products" if tf32 else "TF32 off"


# Where torch.compile keeps its counts (torch._dynamo.utils.counters): a
# frame it converts (a cache miss: the first call of a shape, a
# recompilation, a graph break's frame, one that hit the recompile limit
# and runs eager from then on), the graphs it made, and inductor's skipped
# CUDA graphs. None of them moves on a call that hits a compiled entry.
COMPILE_COUNTS = (("frames", "total"), ("frames", "ok"), ("stats", "unique_graphs"), ("recompiles", "total"),
                  ("inductor", "cudagraph_skips"))


class CompileWatch:
    """torch.compile's counters taken before a timed loop and compared after
    it: a compiled peer is timed only where every call hit what was compiled
    before the loop (its warm-up at the exact input shape). counters: the
    mapping torch._dynamo.utils.counters is (group -> name -> count)."""

    def __init__(self, counters):
        self.counters = counters
        self.before = self.snapshot()

    def snapshot(self) -> dict[str, int]:
        return {f"{group}.{name}": int((self.counters.get(group) or {}).get(name, 0))
                for group, name in COMPILE_COUNTS}

    def problem(self) -> str | None:
        after = self.snapshot()
        moved = {k: after[k] - self.before[k] for k in after if after[k] != self.before[k]}
        if not moved:
            return None
        return ("torch.compile compiled inside the timed loop (a recompilation, or a fallback to eager: "
                + ", ".join(f"{k} +{v}" for k, v in moved.items()) + "): not a compiled peer's time, refused")


def compile_watch(torch) -> CompileWatch:
    return CompileWatch(torch._dynamo.utils.counters)


def no_recompile_limit(torch, at_least: int = 64) -> None:
    """Raises dynamo's limit on compiled entries per function (recompile_limit,
    cache_size_limit before PyTorch 2.6; 8 by default) so that a peer's
    batch sizes never push a function past it (past it, dynamo runs it eager
    without a word); and makes a limit hit an error where PyTorch has the
    switch (fail_on_recompile_limit_hit)."""
    config = torch._dynamo.config
    for key in ("recompile_limit", "cache_size_limit"):
        if hasattr(config, key):
            setattr(config, key, max(int(getattr(config, key)), at_least))
    if hasattr(config, "fail_on_recompile_limit_hit"):
        config.fail_on_recompile_limit_hit = True


# ---- the run ----------------------------------------------------------------------------------------------


@dataclass
class Prepared:
    """One peer on one case, ready to run: run() does the work once,
    result() gives the output of the last run as a NumPy array (waiting for
    the device where there is one), label says what ran."""

    run: Callable[[], object]
    result: Callable[[], np.ndarray]
    label: str
    # Asked once the case is timed: a problem found then (a recompilation
    # inside the timed loop: CompileWatch) refuses the case instead of
    # recording its times; None: nothing to ask.
    verify: Callable[[], str | None] | None = None


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, round(q / 100 * (len(sorted_values) - 1)))]


class Session:
    """Collects the entries of one scripts/peers run and prints a line per case."""

    def __init__(self, selection: Selection, repetitions: int, min_time: float, threads: int, gpu: bool,
                 budget: float | None = None, problems: Problems | None = None):
        self.selection = selection
        # the descriptors' shapes (--softmax, --gemm, --net): with any given,
        # the families run those alone; else their default shapes
        self.problems = problems or Problems()
        self.repetitions = repetitions
        self.min_time = min_time
        self.threads = threads
        self.gpu = gpu  # a CUDA device is usable: GPU peers are registered
        self.budget = budget  # seconds from now after which no further case starts (None: no limit)
        self.deadline = None if budget is None else time.monotonic() + budget
        self.entries: list[dict] = []
        self.labels: dict[str, str] = {}  # '<op>/<peer>' -> what it is (versions, settings), for the context
        self.not_run: list[str] = []  # the cases the budget left out, with their suffix
        self._skipped: set[str] = set()

    @staticmethod
    def suffix(gpu: bool) -> str:
        return "manual_time" if gpu else "real_time"

    def selected(self, name: str, gpu: bool = False) -> bool:
        return (self.gpu or not gpu) and self.selection(name, self.suffix(gpu))

    def skip(self, peer: str, reason: str) -> None:
        """One line per peer and reason, however many cases it would have had."""
        if (peer, reason) not in self._skipped:
            self._skipped.add((peer, reason))
            print(f"peers: {peer} skipped: {reason}", file=sys.stderr)

    def have_torch(self, peers: str) -> bool:
        """Whether torch, safetensors and dlbench.nets (the networks in
        PyTorch) import, as the network and training peers need; if not,
        `peers` are skipped, saying why."""
        try:
            import torch  # noqa: F401
            import safetensors.torch  # noqa: F401

            import dlbench.nets  # noqa: F401
        except ImportError as e:
            self.skip(peers, f"torch or safetensors not installed ({e})")
            return False
        return True

    def out_of_time(self, names: list[str], gpu: bool = False) -> bool:
        """Whether the time budget is spent: then `names` are recorded as not
        run (no entry: neither a time nor an error) and the caller starts none
        of them. A case already started runs to its end."""
        if self.deadline is None or time.monotonic() < self.deadline:
            return False
        if not self.not_run:
            print(f"peers: the time budget of {self.budget:g} s is spent: the cases left are not run", file=sys.stderr)
        self.not_run += [f"{n}/{self.suffix(gpu)}" for n in names]
        return True

    def prepare(self, peer: str, make: Callable, *args):
        """make(*args), or None with the peer skipped (one line) where its package or device is missing."""
        try:
            return make(*args)
        except PeerUnavailable as e:
            self.skip(peer, str(e))
            return None

    def fail(self, name: str, problem: str, gpu: bool = False) -> None:
        full = f"{name}/{self.suffix(gpu)}"
        self.entries.append({"name": full, "run_name": full, "run_type": "iteration", "error_occurred": True,
                             "error_message": problem, "iterations": 0, "real_time": 0, "cpu_time": 0,
                             "time_unit": "ns"})
        print(f"peers: {name}: {problem}", file=sys.stderr)

    def check(self, name: str, prepared: Prepared, expected, tolerance: float, block: int | None = None,
              gpu: bool = False, extra: Callable[[np.ndarray], str | None] | None = None) -> Check | None:
        """Runs the peer once and compares its output with the reference; a
        failure is the case's error entry (no time) and returns None."""
        prepared.run()
        out = prepared.result()
        checked = compare(out, expected, tolerance, block)
        problem = None if checked.ok else checked.summary()
        if problem is None and extra is not None:
            problem = extra(out)
        if problem is not None:
            self.fail(name, problem, gpu)
            return None
        return checked

    def measure(self, name: str, prepared: Prepared, *, gpu: bool = False, bytes_per_call: float | None = None,
                flops_per_call: float | None = None, items_per_call: float | None = None,
                counters: dict | None = None, latency: bool = False,
                flush: Callable[[], object] | None = None, describes: str | None = None) -> None:
        """Times a checked case and adds its repetitions: rates from the per-call
        counts (bytes_per_second, flops, items_per_second), the fixed counters,
        batch-1 latency percentiles where asked, the machine state (CPU). The
        peer (the name's second part) is described in the context by
        `describes`, else by the case's label, under '<op>/<peer>' (peer_torch
        is a different call in each family). Past the time budget the case
        is recorded as not run instead."""
        if self.out_of_time([name], gpu):
            return
        parsed = split_name(name)
        self.labels[f"{parsed.op}/{parsed.variant}"] = describes or prepared.label
        if gpu:
            reps = time_gpu(prepared.run, self.repetitions, self.min_time, flush)
        else:
            reps = time_cpu(prepared.run, self.repetitions, self.min_time)
        problem = prepared.verify() if prepared.verify is not None else None
        if problem:
            self.fail(name, problem, gpu)
            return
        full = f"{name}/{self.suffix(gpu)}"
        shown = []
        for index, rep in enumerate(reps):
            per_call = rep.seconds / rep.calls
            e = {"name": full, "run_name": full, "run_type": "iteration", "repetitions": len(reps),
                 "repetition_index": index, "threads": 1, "iterations": rep.calls,
                 "real_time": per_call * 1e9, "cpu_time": per_call * 1e9, "time_unit": "ns"}
            if bytes_per_call is not None:
                e["bytes_per_second"] = bytes_per_call / per_call
            if flops_per_call is not None:
                e["flops"] = flops_per_call / per_call
            if items_per_call is not None:
                e["items_per_second"] = items_per_call / per_call
            e.update(counters or {})
            if latency:
                singles = sorted(rep.singles)
                for q in (50, 90, 99):
                    e[f"latency_p{q}_us"] = percentile(singles, q) * 1e6
            if not gpu:
                if rep.contention is not None:
                    e["contention"] = rep.contention
                if rep.steal is not None:
                    e["steal"] = rep.steal
                e["noisy"] = float((rep.contention or 0) > NOISY_CONTENTION or (rep.steal or 0) > NOISY_STEAL)
            e["label"] = prepared.label
            self.entries.append(e)
            shown.append(e)
        print(f"{name:58s} {_headline(shown)}  {prepared.label}", flush=True)

    def record(self, name: str, label: str, runs: list[tuple[float, dict]], *, gpu: bool = False,
               items_per_call: float | None = None) -> None:
        """Adds a case the caller ran and timed itself, one call per
        repetition (a whole epoch: its wall time, each from the same start),
        each repetition with its own counters: runs = [(seconds, counters)].
        Validated by the caller before it records; no warm-up call here."""
        parsed = split_name(name)
        self.labels[f"{parsed.op}/{parsed.variant}"] = label
        full = f"{name}/{self.suffix(gpu)}"
        shown = []
        for index, (seconds, counters) in enumerate(runs):
            e = {"name": full, "run_name": full, "run_type": "iteration", "repetitions": len(runs),
                 "repetition_index": index, "threads": 1, "iterations": 1,
                 "real_time": seconds * 1e9, "cpu_time": seconds * 1e9, "time_unit": "ns"}
            if items_per_call is not None:
                e["items_per_second"] = items_per_call / seconds
            e.update(counters)
            e["label"] = label
            self.entries.append(e)
            shown.append(e)
        print(f"{name:58s} {_headline(shown)}  {label}", flush=True)


def _headline(entries: list[dict]) -> str:
    for key, scale, unit in (("items_per_second", 1, "items/s"), ("flops", 1e9, "GFLOP/s"),
                             ("bytes_per_second", 1e9, "GB/s")):
        if key in entries[0]:
            return f"{statistics.median(e[key] for e in entries) / scale:12,.1f} {unit}"
    return f"{statistics.median(e['real_time'] for e in entries) / 1e3:12,.1f} us"
