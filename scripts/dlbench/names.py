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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TIME_SUFFIXES = ("real_time", "manual_time", "process_time")
GRAMMAR = ("<op>/<device>[_<variant>][/<arg>:<value>]...[/pass][/min_time:<s>][/iterations:<n>]"
           "/<real_time|manual_time>")
PATTERN = re.compile(r"[a-z0-9_]+/(cpu|gpu|peer)(_[a-z0-9_]+)?(/[a-z0-9_]+:[a-z0-9_]+)*(/pass)?"
                     r"(/min_time:[0-9.]+)?(/iterations:[0-9]+)?/(real_time|manual_time)")


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
        return self.variant.split("_", 1)[0]

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
