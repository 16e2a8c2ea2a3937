"""One epoch of Fashion-MNIST with PyTorch on a GPU (issue 46), beside our
train_epoch --impl=gpu_...:

    <net>_epoch/peer_torch_cuda_graph/batch:64   mnist_cnn, mnist_lenet

The epoch of scripts/train.py --epoch-reference (the committed
models/fashion-mnist/<net>.epoch-reference.json) on the GPU: the same
fresh start and order (scripts/dlbench/torch_epoch.py, the one copy both
read; kernels/nn/train/epoch.h draws the same), batch 64, drop_last (937
steps over the 60,000 training images), SGD lr 0.01 momentum 0.9, no
augmentation, dropout off. Registered only where PyTorch sees a CUDA
device, as the other GPU peers; fp32 with TF32 off and cuDNN's heuristic
(training._cuda_torch).

The step: forward, nll_loss, backward and optimizer.step() captured once in
a CUDA graph (after three warm-up steps on a side stream) and replayed per
batch. Each batch is gathered on the host into one of two pinned buffers
and copied into the graph's static input with non_blocking=True; an event
after each copy says when its buffer may be refilled (two steps later), so
the host gathers the next batch while the device runs this one. The
warm-up moved the parameters and momentum buffers: before each epoch they
are set back in place (the fresh values copied into the same tensors, the
buffers zeroed: SGD's first step, which sets a buffer to the gradient, and
0.9 x 0 + g give the same bits), so the graph's tensors stay the ones it
captured. Each step's loss is copied on the device into a buffer read once
at the end.

Timed: the epoch's 937 steps, wall clock from the first batch's gather to
the device's end (synchronized), the copies included, the evaluation not;
items_per_second = 937 x 64 / that. Each repetition is a whole epoch from
the fresh start.

Validated (each repetition; a failure is the case's error entry, no time)
against the committed reference (PyTorch's CPU epoch): the first 20 steps'
losses within dlbench.epoch.losses_agree's bound (the analysis is there),
every window of 100 steps' mean loss within 6.5e-3 and the test accuracy
within 0.5 point of the mean of the reference's runs (tests/test_epoch.cpp's
figures for our CPU epoch).

Over fewer training images (the GPU kit carries 1,280: 20 steps of 64, in
the permutation of 1,280, not the reference's), the epoch is that one:
every step over what is there, and its first 20 steps (or all, where fewer)
are validated against the same steps run eagerly on the CPU by PyTorch
(EpochRunner(device="cpu", graph=False)) within the same bound; the
reference's windows and accuracy do not apply. The kit sets our
train_epoch over the same images beside it (scripts/dlbench/kit.py epoch
--peers).

Counters: last_loss (step 936's loss), last_window_loss (the mean of the
last window's, steps 900..936, as train_epoch prints it), test_accuracy
and test_loss (the 10,000 test images after the epoch, the loss a mean
nll_loss in double), loss_0 .. loss_19 (the first 20 steps' losses),
first_steps_share (the worst of the first 20 steps' differences from the
reference's as a share of its bound: at most 1), steps.

Unverified on hardware until a device run: the CUDA graph path. Its logic
(start, order, batches through the staging buffers, the reset) runs on the
CPU, eagerly, in tests/test_peers_torch.py (EpochRunner(device="cpu",
graph=False))."""

from __future__ import annotations

import json
import time

import numpy as np

from dlbench import epoch as shared
from dlbench.peers.harness import Session
from dlbench.peers.training import DATA, MODELS, _cuda_torch

PEER = "peer_torch_cuda_graph"
WARMUP_STEPS = 3
TRAIN_IMAGES = 60_000  # the epoch is over the whole training set


def case_names() -> list[tuple[str, str]]:
    return [(net, f"{net}_epoch/{PEER}/batch:{shared.EPOCH_BATCH}") for net in shared.EPOCH_NETS]


class EpochRunner:
    """The epoch of network `name` on `device`: built once (the model, the
    static batch, the staging buffers, with graph=True the captured step),
    then run() any number of times, each from the fresh start."""

    def __init__(self, name, train_images, train_labels, test_images, test_labels, torch,
                 device: str = "cuda", graph: bool = True):
        from dlbench import torch_epoch as te
        from dlbench.nets import NETWORKS, network_input

        self.torch, self.device, self.graph = torch, device, graph
        cuda = device != "cpu"
        shape = NETWORKS[name].input_shape
        model, _ = te.fresh_model(name)
        self.model = model.to(device)
        self.initial = [p.detach().clone() for p in self.model.parameters()]
        self.opt = te.optimizer(self.model)
        self.order = torch.from_numpy(te.order(len(train_images)))
        self.batch = te.EPOCH_BATCH
        self.steps = te.steps_of(len(train_images))
        self.train_x = network_input(train_images, shape)  # on the host, as a loader's
        self.train_y = torch.from_numpy(train_labels.astype(np.int64))
        self.test_x = network_input(test_images, shape).to(device)
        self.test_y = torch.from_numpy(test_labels.astype(np.int64))
        self.host_x = [torch.empty((self.batch, *shape), pin_memory=cuda) for _ in range(2)]
        self.host_y = [torch.empty(self.batch, dtype=torch.int64, pin_memory=cuda) for _ in range(2)]
        self.copied = [torch.cuda.Event() for _ in range(2)] if cuda else None
        self.x = torch.empty((self.batch, *shape), device=device)
        self.y = torch.empty(self.batch, dtype=torch.int64, device=device)
        self.losses = torch.empty(self.steps, device=device)
        self.loss = None  # the graph's static loss
        self.load(0, 0)
        if graph:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(WARMUP_STEPS):  # cuDNN's handles and workspaces, the momentum buffers
                    te.eager_step(self.model, self.opt, self.x, self.y)
            torch.cuda.current_stream().wait_stream(side)
            self.cuda_graph = torch.cuda.CUDAGraph()
            self.opt.zero_grad(set_to_none=True)  # the backward in the graph allocates the gradients from its pool
            with torch.cuda.graph(self.cuda_graph):
                self.loss = te.loss_of(self.model(self.x), self.y)
                self.loss.backward()
                self.opt.step()
            torch.cuda.synchronize()

    def load(self, step: int, k: int) -> None:
        """Batch `step` into staging buffer k, then into the static batch."""
        torch = self.torch
        idx = self.order[step * self.batch : (step + 1) * self.batch]
        if self.copied is not None:
            self.copied[k].synchronize()  # buffer k's copy of two steps ago is done
        torch.index_select(self.train_x, 0, idx, out=self.host_x[k])
        torch.index_select(self.train_y, 0, idx, out=self.host_y[k])
        self.x.copy_(self.host_x[k], non_blocking=True)
        self.y.copy_(self.host_y[k], non_blocking=True)
        if self.copied is not None:
            self.copied[k].record()

    def reset(self) -> None:
        """The fresh start, in place: the same tensors the graph captured."""
        with self.torch.no_grad():
            for p, v in zip(self.model.parameters(), self.initial):
                p.copy_(v)
            for state in self.opt.state.values():
                if state.get("momentum_buffer") is not None:
                    state["momentum_buffer"].zero_()

    def run(self, steps: int | None = None) -> tuple[list[float], float]:
        """One epoch (or its first `steps` steps) from the fresh start:
        (every step's loss, the wall time in seconds)."""
        from dlbench import torch_epoch as te

        torch = self.torch
        steps = self.steps if steps is None else steps
        self.reset()
        if self.device != "cpu":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for s in range(steps):
            self.load(s, s % 2)
            if self.graph:
                self.cuda_graph.replay()
                loss = self.loss
            else:
                loss = te.eager_step(self.model, self.opt, self.x, self.y)
            self.losses[s].copy_(loss.detach())
        if self.device != "cpu":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        return self.losses[:steps].cpu().tolist(), seconds

    def evaluate(self) -> tuple[float, float]:
        """(test accuracy, test loss) of the model as it is now."""
        from dlbench import torch_epoch as te

        return te.accuracy_and_loss(te.evaluate(self.model, self.test_x), self.test_y)


def reference(name: str) -> dict:
    return json.loads((MODELS / f"{name}.epoch-reference.json").read_text())


def validate(losses: list[float], accuracy: float, ref: dict) -> tuple[str | None, float]:
    """(what is wrong, or None; the first steps' worst share of their bound)
    of an epoch against the reference (the module's docstring)."""
    first = shared.losses_agree(losses, ref["losses"])
    share = first.difference / first.tolerance
    if not first.holds:
        return f"the first {first.steps} steps' losses against PyTorch's CPU epoch: {first}", share
    if len(losses) != len(ref["losses"]):
        return f"{len(losses)} steps, the reference has {len(ref['losses'])}", share
    ok, window, diff = shared.windows_agree(losses, ref["losses"])
    if not ok:
        return (f"steps {window * shared.WINDOW}..{min(len(losses), (window + 1) * shared.WINDOW) - 1}: mean loss "
                f"{diff:.3g} from PyTorch's CPU epoch's (bound {shared.WINDOW_LOSS_TOLERANCE})"), share
    theirs = [ref["test_accuracy"]] + [r["test_accuracy"] for r in ref.get("other_runs", [])]
    mean = sum(theirs) / len(theirs)
    if not abs(100 * accuracy - 100 * mean) <= shared.ACCURACY_POINTS:
        return (f"test accuracy {100 * accuracy:.2f}% against PyTorch's CPU epoch's {100 * mean:.2f}% "
                f"(bound {shared.ACCURACY_POINTS} point)"), share
    return None, share


def validate_first(losses: list[float], eager: list[float]) -> tuple[str | None, float]:
    """(what is wrong, or None; the worst share of the bound) of an epoch's
    first steps against PyTorch's eager CPU run of the same steps."""
    first = shared.losses_agree(losses, eager, steps=len(eager))
    share = first.difference / first.tolerance
    if not first.holds:
        return f"the first {first.steps} steps' losses against PyTorch's eager CPU steps: {first}", share
    return None, share


def counters_of(losses: list[float], accuracy: float, test_loss: float, share: float) -> dict:
    last_window = shared.window_means(losses, shared.WINDOW)[-1]
    c = {"last_loss": losses[-1], "last_window_loss": last_window, "test_accuracy": accuracy,
         "test_loss": test_loss, "first_steps_share": share, "steps": float(len(losses))}
    c.update({f"loss_{s}": losses[s] for s in range(min(shared.FIRST_STEPS, len(losses)))})
    return c


def epoch(session: Session) -> None:
    if session.problems.given:  # no descriptor names an epoch: a descriptor runs its problem alone
        return
    wanted = [(net, name) for net, name in case_names() if session.selected(name, True)]
    if not wanted or not session.have_torch("epoch peers"):
        return
    import torch

    from dlbench.nets import load_fashion

    train_images, train_labels = load_fashion(DATA, "train")
    test_images, test_labels = load_fashion(DATA, "test")
    version = torch.__version__.split("+")[0]
    steps = len(train_images) // shared.EPOCH_BATCH
    label = (f"torch {version} one epoch ({steps} steps, batch 64, over {len(train_images):,} training images) from "
             f"the fresh start, a CUDA graph of the whole step "
             f"(forward, nll_loss, backward, SGD momentum 0.9) replayed per batch, each batch copied from pinned "
             f"host memory (non_blocking), TF32 off, fp32; wall time incl. the copies")
    for net, name in wanted:
        if session.out_of_time([name], True):
            continue
        full = len(train_images) == TRAIN_IMAGES
        try:
            _cuda_torch(torch)
            if full:
                ref = reference(net)
            else:  # the same first steps, eagerly on the CPU
                cpu = EpochRunner(net, train_images, train_labels, test_images, test_labels, torch,
                                  device="cpu", graph=False)
                eager, _ = cpu.run(min(shared.FIRST_STEPS, cpu.steps))
                del cpu
            runner = EpochRunner(net, train_images, train_labels, test_images, test_labels, torch)
        except Exception as e:  # a mode PyTorch cannot build here: an error entry, the rest runs on
            session.fail(name, f"{type(e).__name__}: {e}".splitlines()[0], True)
            continue
        runs = []
        for _ in range(session.repetitions):
            losses, seconds = runner.run()
            accuracy, test_loss = runner.evaluate()
            problem, share = validate(losses, accuracy, ref) if full else validate_first(losses, eager)
            if problem:
                session.fail(name, "WRONG RESULT: " + problem, True)
                break
            runs.append((seconds, counters_of(losses, accuracy, test_loss, share)))
        else:
            session.record(name, label, runs, gpu=True, items_per_call=float(runner.steps * runner.batch))
        del runner
