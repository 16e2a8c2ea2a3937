"""PyTorch's side of the one-epoch comparison (issue 35): the fresh start of
scripts/dlbench/epoch.py put into a PyTorch model, the step and the
evaluation after the epoch. One copy, read by scripts/train.py
--epoch-reference (PyTorch's CPU epoch, the committed reference) and by
the epoch peer (scripts/dlbench/peers/epoch.py: the same epoch on a GPU,
its step in a CUDA graph), so that both start from the same values and
take the batches in the same order.

Needs torch (the peers' environment); dlbench.epoch stays NumPy only."""

from __future__ import annotations

import numpy as np
import torch

from dlbench.epoch import (EPOCH_BATCH, EPOCH_LR, EPOCH_MOMENTUM, EPOCH_NETS, EPOCH_SEED,  # noqa: F401
                           epoch_order, init_values)
EVAL_CHUNK = 500  # test images per forward pass in evaluate()


def fresh_init(model, seed: int = EPOCH_SEED) -> dict:
    """Every parameter from the shared generator (scripts/dlbench/epoch.py);
    returns, per tensor, its first 4 values and its sum (in double)."""
    modules = dict(model.named_modules())
    check = {}
    with torch.no_grad():
        for j, (pname, p) in enumerate(model.named_parameters()):
            module = modules[pname.rsplit(".", 1)[0]]
            fan_in = module.weight[0].numel()  # Conv2d: c r r; Linear: in_features
            p.copy_(torch.from_numpy(init_values(seed, j, p.numel(), fan_in).reshape(p.shape)))
            flat = p.detach().flatten()
            check[pname] = {"first": [float(v) for v in flat[:4]], "sum": float(flat.double().sum())}
    return check


def fresh_model(name: str):
    """(model, init check) for network `name`: the fresh start, in eval mode
    (dropout off, as the C++ step: mnist_cnn's dropouts are its only
    training-mode difference)."""
    from dlbench.nets import NETWORKS

    model = NETWORKS[name]()
    check = fresh_init(model, EPOCH_SEED)
    model.eval()
    return model, check


def order(n: int) -> np.ndarray:
    """The epoch's order of the n training images."""
    return epoch_order(EPOCH_SEED, n)


def steps_of(n: int, batch: int = EPOCH_BATCH) -> int:
    """Full batches in an epoch of n images (drop_last): 937 for 60,000."""
    return n // batch


def batch_indices(order_: np.ndarray, step: int, batch: int = EPOCH_BATCH) -> np.ndarray:
    return order_[step * batch : (step + 1) * batch]


def optimizer(model):
    """SGD, lr 0.01, momentum 0.9, no weight decay, dampening 0."""
    return torch.optim.SGD(model.parameters(), lr=EPOCH_LR, momentum=EPOCH_MOMENTUM)


def loss_of(output, target):
    """The MNIST networks end in log-softmax: the loss is nll_loss (mean)."""
    return torch.nn.functional.nll_loss(output, target)


def eager_step(model, opt, x, y):
    """One step as scripts/train.py --epoch-reference takes it: the gradients
    set to None, forward, loss, backward, SGD; returns the loss (a tensor)."""
    opt.zero_grad(set_to_none=True)
    loss = loss_of(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def evaluate(model, test_x, chunk: int = EVAL_CHUNK):
    """The network's output on every test image, in chunks, no autograd."""
    model.eval()
    with torch.no_grad():
        return torch.cat([model(test_x[i : i + chunk]) for i in range(0, len(test_x), chunk)])


def accuracy_and_loss(outputs, test_y) -> tuple[float, float]:
    """(top-1 accuracy, mean nll_loss in double) of the log-probabilities."""
    outputs, test_y = outputs.cpu(), test_y.cpu()
    accuracy = float((outputs.argmax(1) == test_y).double().mean())
    return accuracy, float(torch.nn.functional.nll_loss(outputs.double(), test_y))
