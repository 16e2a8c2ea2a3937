#!/usr/bin/env python3
"""Where each layer of a network should run, CPU or GPU, from measured layer
times: the best placement per batch, its predicted pass time, and the
measured passes of the hybrid backends next to it.

    scripts/placement.py CPU_RUN GPU_RUN [MORE_RUN ...] [--network resnet20]
                         [--cpu-backend cpu_own] [--gpu-backend gpu_cudnn]
                         [--batch B ...] [--memory pinned|pageable]
                         [--h2d-gbps G] [--d2h-gbps G] [--latency-us U]
                         [--plot plots/placement.png]

CPU_RUN holds <net>_layer/<cpu-backend>/batch:<b>/layer:<i> cases, GPU_RUN
the same for the GPU backend; MORE_RUN files (the GPU host's copy and
whole-network runs, say) add copy cases (copy/gpu_h2d_pinned_async/...,
copy/gpu_d2h_...) and whole-network cases (<net>/<backend>/batch:<b>).
Runs are files (.json or .json.gz), read through dlbench.results.

For every batch with layer times in both runs it prints, per layer, the
CPU and GPU time, the device of the best placement and the copy at each
change of device; the predicted pass of the best placement, all-CPU,
all-GPU and each hybrid backend's own placement; and the measured whole
passes of the GPU backend, every gpu_hybrid_* backend and the CPU backend,
each with the file and machine it comes from. A batch with layer times in
one run only is named as such. It says which machine each run is from, and
warns where the CPU and GPU layer times come from different hosts.

The model (scripts/dlbench/placement.py) is the chain of layers in
execution order with a copy where the device changes; residual joins'
copies are not charged, so the prediction is a lower bound where a
shortcut crosses devices. docs/placement.md explains the output.

Exit codes: 0 done; 2 bad input (missing file, not Google Benchmark JSON,
no layer cases of the backend, no batch in both runs, no copy rate).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlbench import cli, venv  # noqa: E402

venv.reexec("placement")

from dlbench import placement_runs as pr  # noqa: E402
from dlbench.quality import warn  # noqa: E402
from dlbench.results import ResultsError, load  # noqa: E402


def positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be above 0: {text!r}")
    return v


def non_negative(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text!r}")
    return v


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cpu_run", type=Path, help="the run with the CPU backend's layer cases")
    parser.add_argument("gpu_run", type=Path, help="the run with the GPU backend's layer cases")
    parser.add_argument("more", type=Path, nargs="*", help="more runs: copy and whole-network cases")
    parser.add_argument("--network", default="resnet20", help="default %(default)s")
    parser.add_argument("--cpu-backend", default="cpu_own",
                        help="the CPU layers' backend (default %(default)s: what gpu_hybrid_first_conv runs on the CPU)")
    parser.add_argument("--gpu-backend", default="gpu_cudnn", help="the GPU layers' backend (default %(default)s)")
    parser.add_argument("--batch", type=int, nargs="+", help="only these batch sizes (default: every one in a run)")
    parser.add_argument("--memory", choices=("pinned", "pageable"), default="pinned",
                        help="which host memory's copy cases give the copy rates (default %(default)s)")
    parser.add_argument("--h2d-gbps", type=positive, help="host-to-device rate, GB/s (overrides the runs)")
    parser.add_argument("--d2h-gbps", type=positive, help="device-to-host rate, GB/s (overrides the runs)")
    parser.add_argument("--latency-us", type=non_negative, help="fixed cost per copy, us (overrides the runs)")
    parser.add_argument("--plot", type=Path, help="write the figure (PNG) here, e.g. plots/placement.png")
    args = parser.parse_args(argv)

    try:
        cpu_run, gpu_run = load(args.cpu_run), load(args.gpu_run)
        more = [load(p) for p in args.more]
    except ResultsError as e:
        print(f"placement: {e}", file=sys.stderr)
        return 2
    for run in (cpu_run, gpu_run, *more):
        warn("placement", run)
    net = args.network
    cpu_batches = pr.layer_batches(cpu_run, net, args.cpu_backend)
    gpu_batches = pr.layer_batches(gpu_run, net, args.gpu_backend)
    for run, backend, found in ((cpu_run, args.cpu_backend, cpu_batches), (gpu_run, args.gpu_backend, gpu_batches)):
        if not found:
            have = sorted({c.variant for c in run.family(f"{net}_layer") if "layer" in c.args})
            print(f"placement: {run.path}: no {net}_layer/{backend}/.../layer:<i> cases"
                  + (f" (it has {', '.join(have)})" if have else f" (no {net}_layer cases at all)"), file=sys.stderr)
            return 2
    try:
        copy = pr.copy_model([gpu_run, *more], args.memory, args.h2d_gbps, args.d2h_gbps, args.latency_us)
    except ResultsError as e:
        print(f"placement: {e}", file=sys.stderr)
        return 2

    print(f"placement of {net}: CPU layers {args.cpu_backend}, GPU layers {args.gpu_backend}")
    print("  " + pr.machine_line("CPU run", cpu_run))
    print("  " + pr.machine_line("GPU run", gpu_run))
    for r in more:
        print("  " + pr.machine_line("more", r) + ("" if pr.same_host_kind(r, gpu_run) and r.machine == gpu_run.machine
                                                   else "  (NOT the GPU run's machine)"))
    mixed = not pr.same_host_kind(cpu_run, gpu_run)
    if mixed:
        print(f"WARNING: the placement mixes hosts: the CPU layer times are from {cpu_run.machine} "
              f"({cpu_run.context.get('cpu_model', '?')}, {cpu_run.context.get('cpu_cores', '?')} cores), the GPU "
              f"layer times and copy rates from {gpu_run.machine} ({gpu_run.context.get('cpu_model', '?')}, "
              f"{gpu_run.context.get('cpu_cores', '?')} cores): no machine has this pair of devices. The hybrid "
              "backends' measured times are from the GPU run's host, whose CPU ran their CPU layers.")
    print(f"copy costs ({args.memory} host memory):")
    for note in copy.notes:
        print(f"  {note}")
    print("model: the chain of layers in execution order, a copy of a layer's input where the device changes, "
          "the input starting and the output ending on the host; residual joins' copies are NOT charged, so the "
          "prediction is a lower bound where a block's shortcut and its conv2 sit on different devices; layer "
          "times are summed, without the launch and dispatch gap of a real pass (its size: the layer cases' own "
          "passes, below).")

    batches = sorted(cpu_batches | gpu_batches)
    if args.batch:
        for b in args.batch:
            if b not in cpu_batches and b not in gpu_batches:
                print(f"\nbatch {b}: no layer times in either run")
        batches = [b for b in batches if b in args.batch]
    plans = []
    for b in batches:
        print(f"\nbatch {b}:")
        if b not in gpu_batches:
            print(f"  CPU layer times ({args.cpu_backend}, {cpu_run.path.name}) but no GPU layer times "
                  f"({args.gpu_backend}) in {gpu_run.path.name}: no placement at this batch")
            continue
        if b not in cpu_batches:
            print(f"  GPU layer times ({args.gpu_backend}, {gpu_run.path.name}) but no CPU layer times "
                  f"({args.cpu_backend}) in {cpu_run.path.name}: no placement at this batch")
            continue
        try:
            plan = pr.plan_batch(cpu_run, gpu_run, more, net, args.cpu_backend, args.gpu_backend, b, copy.copy)
        except ResultsError as e:
            print(f"placement: {e}", file=sys.stderr)
            return 2
        plans.append(plan)
        for line in pr.table(plan, copy.copy):
            print("  " + line)
        for line in pr.summary(plan, copy.copy, net, cpu_run, gpu_run):
            print(line)
    if not plans:
        print(f"placement: no batch has layer times in both {cpu_run.path} and {gpu_run.path}", file=sys.stderr)
        return 2
    if args.plot:
        import matplotlib.pyplot as plt

        fig = pr.figure(plans, net, args.cpu_backend, args.gpu_backend, mixed)
        try:
            args.plot.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(args.plot, dpi=110)
        except OSError as e:
            print(f"placement: cannot write {args.plot}: {e.strerror or e}", file=sys.stderr)
            return 2
        finally:
            plt.close(fig)
        print(f"\nwrote {args.plot}")
    return 0


if __name__ == "__main__":
    cli.run(main)
