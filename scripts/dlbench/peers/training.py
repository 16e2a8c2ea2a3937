"""Training-step peers (issue 35): PyTorch's CPU training step on the work
of bench's <net>_train cases (bench/train.cpp):

    <net>_train/peer_torch/batch:<b>    PyTorch eager, fp32: zero_grad,
                                        forward, nll_loss, backward,
                                        torch.optim.SGD(lr 0.01, momentum 0.9)

for mnist_cnn and mnist_lenet at batch 64 and 256, from the committed
weights, on the first <b> Fashion-MNIST training images (no augmentation),
dropout off (model.eval(): mnist_cnn's dropouts are its only training-mode
difference), one step per call on the same batch, as bench's cases.

Validation before timing: one step's gradients against the same step in
float64 (the module in double precision), per tensor, max |g32 - g64| /
max |g64| within bench's gradient bound 8 sqrt(N) u (kernels/nn/train.h,
nn::gradient_tolerance). Bench scales the error by the largest magnitude of
the terms (the same sums on absolute values), which is at least max |g64|:
this form is the stricter one. Counters: items_per_second (images/s), flops
(as bench's: forward 2 MACs, backward 2 MACs for the weight gradients and 2
for the input gradients of every conv and fc but the first), max_rel_err."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from dlbench.peers.harness import Prepared, Session

ROOT = Path(__file__).resolve().parents[3]
MODELS = Path(os.environ.get("DLB_MODELS_DIR") or ROOT / "models" / "fashion-mnist")
DATA = Path(os.environ.get("DLB_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
NETWORK_NAMES = ("mnist_cnn", "mnist_lenet")  # the networks bench's training step supports
BATCHES = (64, 256)
LR, MOMENTUM = 0.01, 0.9  # bench/cases/train_case.cpp: nn::Sgd{}


def chain_length(model, shape, batch: int) -> int:
    """kernels/nn/train_params.cpp's gradient_chain_length from the modules."""
    import torch

    n, weight_sum, classes = 0, 0, 0

    def count(module, inputs, output):
        nonlocal n, weight_sum, classes
        if isinstance(module, torch.nn.Conv2d):
            r, stride = module.kernel_size[0], module.stride[0]
            n += module.in_channels * r * r + 1 + max(1, module.out_channels * r * r // (stride * stride))
            weight_sum = max(weight_sum, batch * output.shape[2] * output.shape[3])
        elif isinstance(module, torch.nn.Linear):
            n += module.in_features + 1 + module.out_features
            weight_sum = max(weight_sum, batch)
            classes = module.out_features

    hooks = [m.register_forward_hook(count) for m in model.modules()
             if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    with torch.no_grad():
        model(torch.zeros(1, *shape))
    for h in hooks:
        h.remove()
    return n + weight_sum + 2 * classes


def step_flops(model, shape) -> float:
    """Per image: 2 MACs forward, 2 for the weight gradients, 2 for the input
    gradients of every conv and fc but the first."""
    import torch

    macs = []

    def count(module, inputs, output):
        per_out = module.in_channels * module.kernel_size[0] * module.kernel_size[1] \
            if isinstance(module, torch.nn.Conv2d) else module.in_features
        macs.append(output.numel() * per_out)

    hooks = [m.register_forward_hook(count) for m in model.modules()
             if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    with torch.no_grad():
        model(torch.zeros(1, *shape))
    for h in hooks:
        h.remove()
    return 2.0 * (3 * sum(macs) - macs[0])


def wanted_cases(session: Session) -> list[tuple[str, int]]:
    return [(net, b) for net in NETWORK_NAMES for b in BATCHES
            if session.selected(f"{net}_train/peer_torch/batch:{b}")]


def training(session: Session) -> None:
    wanted = wanted_cases(session)
    if not wanted:
        return
    try:
        import torch
        from safetensors.torch import load_file

        from dlbench.nets import NETWORKS, load_fashion, network_input
    except ImportError as e:
        session.skip("training peers", f"torch or safetensors not installed ({e})")
        return
    images, labels = load_fashion(DATA, "train")
    torch.set_num_threads(session.threads)
    label = f"torch {torch.__version__} eager, fp32, SGD momentum {MOMENTUM}, {session.threads} threads"
    for network, batch in wanted:
        name = f"{network}_train/peer_torch/batch:{batch}"
        if session.out_of_time([name]):
            continue
        state = load_file(str(MODELS / f"{network}.safetensors"))
        shape = NETWORKS[network].input_shape
        x = network_input(images[:batch], shape)
        y = torch.from_numpy(labels[:batch].astype(np.int64))

        def gradients(dtype):
            model = NETWORKS[network]()
            model.load_state_dict(state)
            model.eval()
            model.to(dtype)
            loss = torch.nn.functional.nll_loss(model(x.to(dtype)), y)
            loss.backward()
            return {k: p.grad.detach().double().numpy() for k, p in model.named_parameters()}

        ours, exact = gradients(torch.float32), gradients(torch.float64)
        probe = NETWORKS[network]()
        bound = 8 * math.sqrt(chain_length(probe, shape, batch)) * 2.0 ** -24
        worst, problem = 0.0, ""
        for k, g in exact.items():
            err = float(np.max(np.abs(ours[k] - g)) / max(float(np.max(np.abs(g))), 1e-300))
            worst = max(worst, err)
            if not err <= bound:
                problem += f"{'; ' if problem else ''}{k}: {err:.3g} of the largest gradient (bound {bound:.3g})"
        if problem:
            session.fail(name, "WRONG RESULT: gradients against float64: " + problem)
            continue

        model = NETWORKS[network]()
        model.load_state_dict(state)
        model.eval()
        opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)

        def step():
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.nll_loss(model(x), y).backward()
            opt.step()

        session.measure(name, Prepared(step, lambda: None, label), items_per_call=float(batch),
                        flops_per_call=step_flops(probe, shape) * batch, counters={"max_rel_err": worst})
