"""Case names: the one place scripts/ takes them apart.

A case as Google Benchmark prints and writes it (GRAMMAR, which README.md
and docs/architecture.md quote; PATTERN checks it):

    <op>/<device>[_<variant>][/<arg>:<value>]...[/pass][/min_time:<s>][/iterations:<n>]/<real_time|manual_time>

    daxpy/cpu_omp/n:33554432/real_time
    mnist_cnn_load/cpu/batch:64/threads:2/real_time              (the device alone)
    roofline/cpu_fma/real_time                                   (no argument)
    resnet20_layer/cpu_own/batch:1/layer:3/iterations:100/manual_time
    resnet20_layer/cpu_own/batch:1/pass/manual_time              (a bare part)

`min_time:<s>` (a case with its own minimum time: the GPU conv cases),
`iterations:<n>` (a case that runs a fixed number of iterations) and the
time suffix (`manual_time` where the case times itself: GPU cases by CUDA
events, the per-layer cases; `real_time`, the wall clock, otherwise) are
Google Benchmark's decorations, not what the case is. The case's name, by
which runs are compared, stored, plotted and tabulated, is the console's
name without them: `resnet20_layer/cpu_own/batch:1/layer:3`. Every script
accepts either form (split_name gives the same answer for both).

The variant, `<device>_<implementation>`, says three things read here and
nowhere else: the device (cpu, gpu, peer), the implementation (the rest),
and the precision of its arithmetic, one vocabulary for every script
(PRECISIONS): int8 (a word s8, int8 or u8: cpu_onednn_s8, gpu_own_mma_s8),
bf16, fp16 (f16, fp16 or half: gpu_cudnn_fused_f16, and before a layout
suffix, peer_torch_cuda_graph_f16_cl), tf32 (fp32 data with TF32
tensor-core products: peer_torch_cuda_graph_tf32), else fp32
(cpu_onednn_f32, peer_torch). cpu_fakequant_s8 is named for the int8
network it simulates, in fp32 arithmetic: its precision is int8, and
is_fp32 says it is no fp32 row either. tests/test_names_one_place.py fails
when another module of scripts/ or tests/ takes a name apart by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TIME_SUFFIXES = ("real_time", "manual_time", "process_time")
GRAMMAR = ("<op>/<device>[_<variant>][/<arg>:<value>]...[/pass][/min_time:<s>][/iterations:<n>]"
           "/<real_time|manual_time>")
PATTERN = re.compile(r"[a-z0-9_]+/(cpu|gpu|peer)(_[a-z0-9_]+)?(/[a-z0-9_]+:[a-z0-9_]+)*(/pass)?"
                     r"(/min_time:[0-9.]+)?(/iterations:[0-9]+)?/(real_time|manual_time)")


# The networks (their inference op; "<net>_train" is the training step's,
# "<net>_layer" the layer profile's).
NETWORKS = ("resnet20", "mnist_cnn", "mnist_lenet")


def is_network_op(op: str) -> bool:
    """A whole network's case: an inference pass or a training step."""
    return op in NETWORKS or op in {f"{n}_train" for n in NETWORKS}


PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "int8")
_PRECISION_WORDS = (("int8", {"s8", "int8", "u8"}), ("bf16", {"bf16"}), ("fp16", {"f16", "fp16", "half"}),
                    ("tf32", {"tf32"}))


def words_of(variant: str) -> tuple[str, ...]:
    """'gpu_h2d_pinned_sync' -> ('gpu', 'h2d', 'pinned', 'sync'): the variant's words."""
    return tuple(variant.split("_"))


def device_of(variant: str) -> str:
    """'cpu_onednn_s8' -> 'cpu'; 'cpu' (the device alone) -> 'cpu'; a peer's -> 'peer'."""
    return variant.partition("_")[0]


def implementation_of(variant: str) -> str:
    """'cpu_onednn_s8' -> 'onednn_s8'; '' for the device alone."""
    return variant.partition("_")[2]


def precision_of(variant: str) -> str:
    """fp32, tf32, fp16, bf16 or int8 (PRECISIONS) from a row's or a peer's
    variant: gpu_cudnn_fused_f16 -> fp16, peer_torch_cuda_graph_f16_cl -> fp16,
    gpu_own_mma_s8 -> int8, cpu_onednn_f32 -> fp32."""
    words = set(words_of(variant))
    return next((p for p, said in _PRECISION_WORDS if words & said), "fp32")


def is_fp32(variant: str) -> bool:
    """An fp32 row: fp32 arithmetic, and not fp32 simulating int8 (fakequant)."""
    return precision_of(variant) == "fp32" and "fakequant" not in words_of(variant)


def runs_on(variant: str) -> str:
    """'cpu' or 'gpu': the variant's device, or for a peer 'gpu' where its
    name says CUDA or cuDNN (peer_torch_cuda, peer_torch_cudnn_benchmark)."""
    device = device_of(variant)
    if device != "peer":
        return device
    return "gpu" if {"cuda", "cudnn"} & set(words_of(variant)) else "cpu"


class BadName(ValueError):
    """Not <op>/<variant>/... (the callers turn it into their own input error)."""


@dataclass(frozen=True)
class Name:
    name: str  # without Google Benchmark's decorations
    op: str  # the family's prefix: daxpy, resnet20_layer, ...
    variant: str  # "<device>_<implementation>", e.g. cpu_omp (peer_torch_eager for a peer)
    args: dict[str, int] = field(default_factory=dict)  # the <arg>:<integer> parts
    parts: tuple[str, ...] = ()  # every part after the variant, in order (args and bare parts)

    @property
    def device(self) -> str:
        return device_of(self.variant)

    @property
    def implementation(self) -> str:
        return implementation_of(self.variant)

    @property
    def precision(self) -> str:
        return precision_of(self.variant)

    @property
    def rest(self) -> str:
        """What follows the op: '<variant>/<parts>' (a label within one family)."""
        return "/".join((self.variant, *self.parts))


def split_name(full_name: str) -> Name:
    """'daxpy/cpu_loop/n:1024/real_time' -> Name('daxpy/cpu_loop/n:1024', 'daxpy', 'cpu_loop', {'n': 1024}, ('n:1024',))."""
    parts = full_name.split("/")
    while parts and parts[-1] in TIME_SUFFIXES:
        parts.pop()
    # A fixed iteration count or minimum time is a setting of the case, not
    # part of what it is (the per-layer cases run a fixed number of passes,
    # the GPU conv cases a minimum time of their own): not in its name.
    parts = [p for p in parts if not p.startswith(("iterations:", "min_time:"))]
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise BadName(f"benchmark name {full_name!r} is not <op>/<variant>/...")
    args: dict[str, int] = {}
    for p in parts[2:]:
        key, sep, value = p.partition(":")
        if not sep:
            continue  # a bare part: the per-layer cases' "pass"
        try:
            args[key] = int(value)
        except ValueError:
            continue
    return Name("/".join(parts), parts[0], parts[1], args, tuple(parts[2:]))


def case_name(full_name: str) -> str:
    """The case's name as stored and compared: the console's name without the decorations."""
    return split_name(full_name).name
