"""Placing each layer of a network on the CPU or the GPU (issue: where the
time goes): given each layer's time on each device and the cost of moving an
activation between them, the cheapest assignment of the chain of layers.

The network is taken as the chain of its layers in execution order: layer
i reads layer i-1's output, so a change of device between consecutive layers
costs one copy of that activation (host-to-device or device-to-host), and
the input starts on the host and the output must end there. A residual
join reads an earlier layer's output as well; the chain model does not
charge its copy, so for ResNet20 the prediction is a lower bound where a
block's shortcut and its conv2 sit on different devices (say so where it is
used). Solved exactly by dynamic programming over (layer, device), O(n);
brute_force() checks it on small chains."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

CPU, GPU = 0, 1


@dataclass
class Layer:
    cpu_s: float  # the layer's time on the CPU
    gpu_s: float  # on the GPU
    in_bytes: float  # its input activation (what a move before it copies)


@dataclass
class Copy:
    h2d_bytes_per_s: float
    d2h_bytes_per_s: float
    latency_s: float = 0.0  # per copy, each direction

    def cost(self, src: int, dst: int, nbytes: float) -> float:
        if src == dst:
            return 0.0
        rate = self.h2d_bytes_per_s if dst == GPU else self.d2h_bytes_per_s
        return self.latency_s + nbytes / rate


def _total(layers: list[Layer], out_bytes: float, copy: Copy, devices) -> float:
    total, where = 0.0, CPU
    for layer, d in zip(layers, devices):
        total += copy.cost(where, d, layer.in_bytes) + (layer.cpu_s if d == CPU else layer.gpu_s)
        where = d
    return total + copy.cost(where, CPU, out_bytes)


def best_placement(layers: list[Layer], out_bytes: float, copy: Copy) -> tuple[float, list[int]]:
    """(predicted seconds per pass, device of each layer), the input on the host before the first layer
    and the output copied back to it after the last."""
    if not layers:
        return 0.0, []
    inf = float("inf")
    cost = [[inf, inf] for _ in layers]
    came = [[CPU, CPU] for _ in layers]
    for d in (CPU, GPU):
        cost[0][d] = copy.cost(CPU, d, layers[0].in_bytes) + (layers[0].cpu_s if d == CPU else layers[0].gpu_s)
    for i in range(1, len(layers)):
        for d in (CPU, GPU):
            run = layers[i].cpu_s if d == CPU else layers[i].gpu_s
            for p in (CPU, GPU):
                c = cost[i - 1][p] + copy.cost(p, d, layers[i].in_bytes) + run
                if c < cost[i][d]:
                    cost[i][d], came[i][d] = c, p
    ends = [cost[-1][d] + copy.cost(d, CPU, out_bytes) for d in (CPU, GPU)]
    d = CPU if ends[CPU] <= ends[GPU] else GPU
    total = ends[d]
    devices = [d]
    for i in range(len(layers) - 1, 0, -1):
        d = came[i][d]
        devices.append(d)
    return total, devices[::-1]


def placement_cost(layers: list[Layer], out_bytes: float, copy: Copy, devices: list[int]) -> float:
    """The predicted seconds of a given assignment (all-CPU, all-GPU, the lab's split)."""
    if len(devices) != len(layers):
        raise ValueError(f"{len(devices)} devices for {len(layers)} layers")
    return _total(layers, out_bytes, copy, devices)


def brute_force(layers: list[Layer], out_bytes: float, copy: Copy) -> float:
    """The cheapest total over all 2^n assignments (small n only)."""
    return min(_total(layers, out_bytes, copy, devs) for devs in itertools.product((CPU, GPU), repeat=len(layers)))
