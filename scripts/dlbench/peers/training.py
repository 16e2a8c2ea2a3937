"""Training-step peers (issue 35): PyTorch's training step on the work of
bench's <net>_train cases (bench/nn/train/train.cpp, bench/nn/train/train_gpu.cpp):

    <net>_train/peer_torch/batch:<b>    PyTorch eager, fp32: zero_grad,
                                        forward, the loss, backward,
                                        torch.optim.SGD(lr 0.01, momentum 0.9)
    <net>_train/peer_torch_cl/batch:<b>       the same step in channels_last
                                              (the weights and the batch NHWC
                                              in memory)
    <net>_train/peer_torch_compile/batch:<b>  the forward in torch.compile
                                              (inductor, default mode,
                                              dynamic=False: its backward
                                              compiled too), the loss and
                                              the optimizer eager
  (the CPU's modes, named as the CPU network peers' and the GPU's _cl; the
  compiled one runs after every other peer of every family, as the GPU's);
  on a GPU (registered only where PyTorch sees one), fp32 with TF32 off,
  cudnn.benchmark off, the batch resident on the device:
    <net>_train/peer_torch_cuda/batch:<b>          the same step, eager
    <net>_train/peer_torch_cuda_graph/batch:<b>    the whole step (zero_grad
                                                   aside: the gradients are
                                                   static buffers the graph
                                                   rewrites) captured once
                                                   in a CUDA graph after three
                                                   warm-up steps on a side
                                                   stream, replayed
    <net>_train/peer_torch_cuda_compile/batch:<b>  the forward and loss in
                                                   torch.compile(mode=
                                                   "reduce-overhead",
                                                   dynamic=False: inductor's
                                                   kernels, forward and
                                                   backward in CUDA graphs),
                                                   the optimizer eager
  (unverified on hardware until the next device run; a GPU peer that fails
  to build or validate gets an error entry, not a traceback). The compiled
  peer runs after every other peer of every family (scripts/peers runs the
  families' uncompiled cases first).

  on the CPU, fed by a loader (mnist_cnn):
    <net>_train/peer_torch/batch:<b>/workers:<n>
                                        the same step, each on the next
                                        batch of a DataLoader (n workers)

for resnet20, mnist_cnn and mnist_lenet at batch 64 and 256, from the
committed weights, on the first <b> Fashion-MNIST training images (no
augmentation), one step per call on the same batch, as bench's cases.
resnet20 runs in model.train() (batch-norm on the batch's statistics,
running statistics updated; it has no dropout), its loss cross_entropy on
the logits; the MNIST networks in model.eval() (dropout off: mnist_cnn's
dropouts are its only training-mode difference), their loss nll_loss on the
log-softmax output.

Validation before timing: one step's gradients against the same step in
float64 (the module in double precision, on the CPU), per tensor, max
|g32 - g64| / max |g64| within bench's gradient bound 8 sqrt(N) u
(kernels/nn/train/train.h, nn::gradient_tolerance); a peer's gradients are
those its own mode computes (channels_last, the graph's replay, the compiled
backward) from the committed weights, on the model it then times (the bound
holds each mode: _cpu_step says why for the CPU's). cuDNN's backward
algorithms in PyTorch may sum with atomics in a varying order: the bound is
on the size of the rounding, not its order, so it holds them too. Bench scales the error by the largest magnitude of
the terms (the same sums on absolute values), which is at least max |g64|:
this form is the stricter one. With batch-norm in training mode (resnet20)
it is too strict to hold: a conv before batch-norm has gradients that
cancel far below their magnitudes (its scale drops out), and PyTorch's own
fp32 gradients land up to 1.7e-3 of the largest gradient from float64 there
(stage2.2.conv2.weight at batch 64), while they are within 2.6e-7 of the
largest magnitude in bench's form (tests/test_train.cpp holds them, from
the committed resnet20.train-reference.safetensors, against the double
reference). For resnet20 the loss is held against float64 instead, within
the forward's fp32 bound (1e-5 relative, kernels/nn/infer/nn.cpp), and on the
CPU its logits too (within the same bound, relative to the largest: the
form that bound is stated in; a small loss can hide logits past it), and
the gradients' error in this form is reported, not held. peer_torch_cl,
whose batch norm sums its statistics in fp32 as our cpu_onednn step's
does, gets that step's allowance on these bounds (forward_tolerance,
chain_length; _cpu_step says why).
Counters: items_per_second (images/s), flops
(as bench's: forward 2 MACs, backward 2 MACs for the weight gradients and 2
for the input gradients of every conv and fc but the first), max_rel_err.
The eager peers (peer_torch, peer_torch_cl, peer_torch_cuda and the loaded cases) report
the step's memory under bench's names (bench/nn/train/train_memory.h), from one step
of the timed model before timing (step_memory): weights_bytes (the
parameters), gradients_bytes (their .grad after backward),
optimizer_bytes (torch.optim.SGD's momentum buffers), activations_bytes
(what autograd saved for backward in that step's forward and loss, summed
through torch.autograd.graph.saved_tensors_hooks, each storage once, less
the parameters and the batch and labels, which bench does not count as
kept activations either). PyTorch cannot tell its workspace (its kernels'
scratch comes from the allocator unnamed): no workspace_bytes, no
peak_bytes. peer_torch_cuda adds peak_measured_bytes: how far the CUDA
caching allocator's allocated bytes rose over that step
(torch.cuda.max_memory_allocated after reset_peak_memory_stats, less
memory_allocated before it), plus the parameters and momentum buffers the
step already held (its second step, on a model of its own: cuDNN's and
cuBLAS's first use in the first). The CPU peers measure no peak (PyTorch keeps no
statistics of its CPU allocations). The graph and compiled modes report
none (peer_torch_compile neither): what the graph's pool and inductor's
kernels keep is not what the hooks see.

The loaded cases (mnist_cnn, as bench/nn/train/train_loaded.cpp's): a
torch.utils.data.DataLoader over the Fashion-MNIST training set in the
order of bench's (nn::epoch_order(20261126), scripts/dlbench/epoch.py),
each image normalized, cropped from the image zero-padded by 4 and flipped
as kernels/nn/data/augment.cpp's augment_of says (the same pure function of seed
and index), batch_size b, drop_last, num_workers n (0: in the calling
thread), prefetch_factor 2, persistent workers. Counters: items_per_second,
load_us (the time the step waited for its batch), forward_us (with the
loss), backward_us, optimizer_us (zero_grad and step), each a mean over
every call of the case. Validated first on the loader's first batch: its
loss against float64 (1e-5 relative), the gradients' error reported
(max_rel_err), as for resnet20: on cropped and flipped images the
largest-gradient form does not hold for PyTorch's own fp32 gradients."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np

from dlbench.peers.harness import Prepared, Session, compile_watch, no_recompile_limit, set_fp32_math

ROOT = Path(__file__).resolve().parents[3]
MODELS = Path(os.environ.get("DLB_MODELS_DIR") or ROOT / "models" / "fashion-mnist")
DATA = Path(os.environ.get("DLB_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
NETWORK_NAMES = ("resnet20", "mnist_cnn", "mnist_lenet")  # the networks bench's training step supports
TRAIN_MODE = {"resnet20"}  # batch-norm in training mode; the others in eval mode (dropout off)
BATCHES = (64, 256)
LR, MOMENTUM = 0.01, 0.9  # bench/cases/nn/train/train_case.cpp: nn::Sgd{}
LOSS_TOLERANCE = 1e-5  # the forward's fp32 bound (kernels/nn/infer/nn.cpp, kNetworkTolerance)


def chain_length(model, shape, batch: int, fp32_batch_stats: bool = False) -> int:
    """kernels/nn/train/train_bound.cpp's gradient_chain_length from the modules;
    with fp32_batch_stats, its onednn_gradient_chain_length(net, batch):
    batch-norm's four per-channel sums (the forward's
    mean and variance, the backward's sum dy and sum dy xhat) in fp32, up to
    M - 1 roundings each (M = batch oh ow), 4 M per batch-norm layer on top
    of the 15 (kernels/nn/train/train.h)."""
    import torch

    n, weight_sum, classes = 0, 0, 0

    def count(module, inputs, output):
        nonlocal n, weight_sum, classes
        if isinstance(module, torch.nn.BatchNorm2d):
            n += 15  # batch-norm's fp32 roundings around its double sums
            if fp32_batch_stats:
                n += 4 * batch * output.shape[2] * output.shape[3]
        elif hasattr(module, "downsample"):
            n += 2  # a residual join (dlbench.nets.BasicBlock)
        elif isinstance(module, torch.nn.Conv2d):
            r, stride = module.kernel_size[0], module.stride[0]
            n += module.in_channels * r * r + 1 + max(1, module.out_channels * r * r // (stride * stride))
            weight_sum = max(weight_sum, batch * output.shape[2] * output.shape[3])
        elif isinstance(module, torch.nn.Linear):
            n += module.in_features + 1 + module.out_features
            weight_sum = max(weight_sum, batch)
            classes = module.out_features

    def pooled(module, inputs, output):
        nonlocal n
        n += output.shape[2] * output.shape[3]  # resnet20's global average pool reads stage3's output

    hooks = [m.register_forward_hook(count) for m in model.modules()
             if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear, torch.nn.BatchNorm2d)) or hasattr(m, "downsample")]
    if hasattr(model, "stage3"):
        hooks.append(model.stage3.register_forward_hook(pooled))
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, *shape))
    for h in hooks:
        h.remove()
    return n + weight_sum + 2 * classes


FP32_BATCH_STATS = {"peer_torch_cl"}  # CPU modes whose batch norm sums its statistics in fp32 (_cpu_step)


def batch_norm_terms(model, shape, batch: int) -> int:
    """The sum over the batch-norm layers of M = batch oh ow, the terms of
    each of their per-channel sums."""
    import torch

    m = 0

    def count(module, inputs, output):
        nonlocal m
        m += batch * output.shape[2] * output.shape[3]

    hooks = [x.register_forward_hook(count) for x in model.modules() if isinstance(x, torch.nn.BatchNorm2d)]
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, *shape))
    for h in hooks:
        h.remove()
    return m


def forward_tolerance(model, shape, batch: int, fp32_batch_stats: bool = False) -> float:
    """The bound on the loss (relative) and the logits (relative to the
    largest) of the fp32 step against float64: the forward's fp32 bound
    (LOSS_TOLERANCE, kNetworkTolerance), and with fp32_batch_stats the
    share of batch norm's statistics summed in fp32 on top, derived as
    kernels/nn/train/train.h derives onednn_gradient_tolerance(net, batch)
    (our cpu_onednn step's, whose oneDNN batch norm sums
    in fp32 too): the forward's two per-channel sums (the mean, then the
    variance, sum (z - mean)^2), up to M - 1 roundings each, on every chain
    through the layer, 2 M per batch-norm layer (the backward's two sums
    are the gradients' and do not reach the logits); as independent
    zero-mean roundings, lambda sqrt(N) u with lambda = 8, u = 2^-24, and
    N = 2 sum M. The rest of the forward, the same arithmetic as the NCHW
    step's, keeps the forward's bound, which is added rather than refitted.
    resnet20 at batch 64: 21 batch-norm layers, 7 each at M = 65,536,
    16,384 and 4,096, N = 1,204,224: 5.2e-4 on top, 5.3e-4 in all (1.1e-3
    at batch 256). Not covered, as in train.h's analysis, which measures
    the same sums against magnitudes: a channel whose mean is far above its
    spread passes the mean's rounding on amplified by mean / spread, which a
    bound relative to the largest logit does not see."""
    extra = 0.0
    if fp32_batch_stats:
        extra = 8 * math.sqrt(2 * batch_norm_terms(model, shape, batch)) * 2.0 ** -24
    return LOSS_TOLERANCE + extra


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


def step_memory(model, opt, x, y, loss_of) -> dict:
    """Bench's memory counters of one training step of `model` with `opt` on
    (x, y) (see the module's docstring): runs that step (zero_grad, forward
    and loss with autograd's saved tensors counted, backward, opt.step)."""
    import torch

    def storage(t):
        return t.untyped_storage().data_ptr()

    inputs = {storage(t) for t in (x, y, *model.parameters())}
    saved: dict[int, int] = {}

    def pack(t):
        if storage(t) not in inputs:
            saved[storage(t)] = t.untyped_storage().nbytes()  # alive with the graph: no address reused meanwhile
        return t

    def nbytes(tensors):
        return float(sum(t.numel() * t.element_size() for t in tensors))

    def state_bytes():
        return nbytes(t for st in opt.state.values() for t in st.values() if isinstance(t, torch.Tensor))

    gpu = x.is_cuda
    opt.zero_grad(set_to_none=True)
    params = list(model.parameters())
    if gpu:  # the step's rise above what the device held before it, plus what of it was the step's already
        torch.cuda.synchronize()
        held = nbytes(params) + state_bytes()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_of(model(x), y)
    loss.backward()
    opt.step()
    del loss
    out = {"weights_bytes": nbytes(params),
           "activations_bytes": float(sum(saved.values())),
           "gradients_bytes": nbytes(p.grad for p in params if p.grad is not None),
           "optimizer_bytes": state_bytes()}
    if gpu:
        torch.cuda.synchronize()
        out["peak_measured_bytes"] = float(torch.cuda.max_memory_allocated() - base) + held
    return out


CPU_PEERS = ("peer_torch", "peer_torch_cl", "peer_torch_compile")  # the order they run in
GPU_PEERS = ("peer_torch_cuda", "peer_torch_cuda_graph", "peer_torch_cuda_compile")
COMPILED = ("peer_torch_compile", "peer_torch_cuda_compile")


def wanted_cases(session: Session, compiled: bool | None = None) -> list[tuple[str, str, int]]:
    """(network, peer, batch) of every selected case, in the order they run:
    the CPU peers, then the GPU peers, mode by mode, each over the networks
    and batches. compiled: only the compiled peers (True), only the others
    (False), or all (None)."""
    given = session.problems

    def batches(net):  # a descriptor's (--net=<net>_train/batch:B), else bench's
        return given.training.get(net, []) if given.given else BATCHES
    cases = [(net, p, b) for p in CPU_PEERS for net in NETWORK_NAMES for b in batches(net)
             if session.selected(f"{net}_train/{p}/batch:{b}")]
    cases += [(net, p, b) for p in GPU_PEERS for net in NETWORK_NAMES for b in batches(net)
              if session.selected(f"{net}_train/{p}/batch:{b}", True)]
    return [c for c in cases if compiled is None or (c[1] in COMPILED) == compiled]


def _cuda_torch(torch) -> str:
    """What the GPU training peers pin: strict fp32, as bench's GPU step (TF32
    off for cuDNN's convolutions, forward and both backward passes, and for
    cuBLAS, through whichever API the installed PyTorch reads:
    harness.set_fp32_math), and cuDNN's heuristic choice (benchmark off).

    Not pinned: cudnn.deterministic. It removes only cuDNN's backward
    algorithms that add with atomics (their sums in a varying order, each
    rounding still fp32's: the bound's analysis covers any order), keeps the
    FFT and Winograd ones, and may make the step slower than what a user
    runs. At 56731f5 the step already had TF32 off through the legacy flags
    (which PyTorch 2.9+ maps onto conv 'none', falling back to 'ieee'; the
    fp32 inference peers validated within 1e-5 on the same run with the same
    flags), and mnist_lenet's conv2.weight gradient was still 9.6e-4 of the
    largest from float64's: what remains is cuDNN's algorithm for that 5x5
    convolution's backward, which no PyTorch switch but cuDNN off excludes;
    a refused GPU peer says so (diagnosis)."""
    math = set_fp32_math(torch, tf32=False)
    torch.backends.cudnn.benchmark = False
    return math


def _cpu_step(peer: str, model, x, y, torch, loss_of):
    """(step, gradients, memory, words) for a CPU peer: step() runs one
    training step; gradients() the parameters' gradients, the loss and the
    network's output at the weights the model holds now, computed the mode's way (the compiled
    forward and backward for peer_torch_compile, which compiles them at this
    shape on its first call); memory() runs one step with bench's memory
    counters (step_memory), None for the compiled mode (what inductor's
    kernels keep is not what the saved-tensor hooks see); words: the mode,
    for the label.

    Error analysis of the two modes against the eager one: the gradient
    bound 8 sqrt(N) u counts the roundings along the longest chain a
    gradient goes through (chain_length: each conv's and fc's sums by their
    number of terms, batch-norm's roundings, the joins). It bounds the size
    of the rounding, whatever order each sum takes. channels_last runs the
    same convolutions (oneDNN's, in NHWC) over the same terms in another
    order, and the reorders to and from it (the flatten before the fc) are
    copies: nothing rounds there. Inductor fuses the elementwise work (bias,
    ReLU, batch norm, the residual add) into kernels that round once where
    eager rounds after each operator, so its chain is no longer; it calls
    ATen's convolutions and matrix products as eager does, and splits its
    reductions (batch-norm's statistics, the bias gradients, log-softmax's
    sum) into vector lanes and threads: the same terms, summed in another
    order. Its C++ is built without reassociation beyond that
    (-fno-unsafe-math-optimizations, -ffp-contract=off: inductor's cpp
    builder defaults) and its exp and log are ATen's vectorized ones, as
    eager's. The bound therefore holds all three modes where they run the
    eager step's algorithms; the MNIST networks' gradients are held within
    it, resnet20's loss within the forward's bound, as for the eager peer.

    Not covered by that bound: batch-norm in training mode on a
    channels_last input (resnet20's peer_torch_cl). chain_length counts
    batch-norm's roundings around statistics summed in double (bench's
    batch norm; PyTorch's NCHW CPU kernel accumulates in double too), and
    PyTorch 2.15's channels_last kernel is far less accurate: a lone
    BatchNorm2d on 64 x 16 x 32 x 32 standard normal values came out 1.4e-5
    from float64's at most (4.1e-7 in NCHW), 1.1e-4 with the values' mean
    at 30 (1.5e-6 in NCHW), which is what fp32 sums of the 65,536 terms per
    channel do (the cause as read from the figures, not from PyTorch's
    source). resnet20's logits land 8.5e-6 (batch 64) and 3.2e-5 (256) of
    the largest from float64's (NCHW: 1.3e-7), its loss 1.07e-5 relative
    at batch 64. Our own cpu_onednn step has the same property (oneDNN's
    batch norm sums in fp32) and its bound counts it (kernels/nn/train/train.h,
    onednn_gradient_tolerance(net, batch)): this mode gets the
    same allowance (FP32_BATCH_STATS), on its gradients (chain_length's
    4 M per batch-norm layer) and on its loss and logits (forward_tolerance's
    2 M), no more; the eager NCHW mode, which sums in double, keeps the
    bounds without it."""
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    words = "eager"
    forward = model
    if peer == "peer_torch_cl":
        model.to(memory_format=torch.channels_last)  # the 4-d weights NHWC in memory (in place)
        x = x.contiguous(memory_format=torch.channels_last)  # a channels_last pipeline's batch
        words = "eager, channels_last"
    elif peer == "peer_torch_compile":
        torch._dynamo.reset()
        no_recompile_limit(torch)
        forward = torch.compile(model, dynamic=False)  # a graph at this batch size, as bench's fixed batch
        words = "torch.compile (inductor, default mode, dynamic=False) forward and backward, the optimizer eager"

    step = _sgd_step(opt, forward, x, y, loss_of)

    def gradients():
        opt.zero_grad(set_to_none=True)
        out = forward(x)
        loss = loss_of(out, y)
        loss.backward()
        return ({k: p.grad.detach().contiguous().double().numpy() for k, p in model.named_parameters()},
                float(loss), out.detach().contiguous().double().numpy())

    memory = None if peer in COMPILED else (lambda: step_memory(model, opt, x, y, loss_of))
    return step, gradients, memory, words


def _sgd_step(opt, forward, x, y, loss_of):
    """One training step on the batch, as a closure: the gradients zeroed,
    the loss's backward through forward(x), the optimizer's step."""
    def step():
        opt.zero_grad(set_to_none=True)
        loss_of(forward(x), y).backward()
        opt.step()
    return step


def _gpu_step(peer: str, model, x, y, torch, loss_of):
    """(step, gradients, label) for a GPU peer: step() runs one training step
    on the device-resident batch; gradients() the parameters' gradients and
    the loss at the weights the model holds now, computed the mode's way (for
    the graph: a replay, which also updates the parameters). loss_of(out,
    target): the network's loss (nll_loss, or cross_entropy for resnet20)."""
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    version = torch.__version__.split("+")[0]
    if peer == "peer_torch_cuda":
        step = _sgd_step(opt, model, x, y, loss_of)

        def gradients():
            opt.zero_grad(set_to_none=True)
            loss = loss_of(model(x), y)
            loss.backward()
            return {k: p.grad.detach().double().cpu().numpy() for k, p in model.named_parameters()}, float(loss)
        return step, gradients, f"torch {version} eager on the GPU, TF32 off, fp32, SGD momentum {MOMENTUM}"
    if peer == "peer_torch_cuda_graph":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # warm-up outside the capture: cuDNN handles, workspaces, momentum buffers
                opt.zero_grad(set_to_none=True)
                loss_of(model(x), y).backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)  # the backward in the graph allocates the gradients from its pool
        with torch.cuda.graph(graph):
            static_loss = loss_of(model(x), y)
            static_loss.backward()
            opt.step()

        def gradients():
            graph.replay()
            return ({k: p.grad.detach().double().cpu().numpy() for k, p in model.named_parameters()},
                    float(static_loss))
        return graph.replay, gradients, (f"torch {version} CUDA graph of the whole step (forward, backward, SGD "
                                         f"momentum {MOMENTUM}), replayed, TF32 off, fp32")
    torch._dynamo.reset()
    no_recompile_limit(torch)
    compiled = torch.compile(model, mode="reduce-overhead", dynamic=False)
    mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", lambda: None)

    def step():
        mark()
        opt.zero_grad(set_to_none=True)
        loss_of(compiled(x), y).backward()
        opt.step()

    def gradients():
        mark()
        opt.zero_grad(set_to_none=True)
        loss = loss_of(compiled(x), y)
        loss.backward()
        return {k: p.grad.detach().double().cpu().numpy() for k, p in model.named_parameters()}, float(loss)
    return step, gradients, (f"torch {version} torch.compile(mode=reduce-overhead, dynamic=False) forward and "
                             f"backward, SGD momentum {MOMENTUM} eager, TF32 off, fp32")


def training(session: Session, compiled: bool | None = None) -> None:
    wanted = wanted_cases(session, compiled)
    if not wanted or not session.have_torch("training peers"):
        return
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file

    from dlbench.nets import NETWORKS, load_fashion, network_input
    images, labels = load_fashion(DATA, "train")
    torch.set_num_threads(session.threads)
    for network, peer, batch in wanted:
        gpu = peer not in CPU_PEERS
        name = f"{network}_train/{peer}/batch:{batch}"
        if session.out_of_time([name], gpu):
            continue
        state = load_file(str(MODELS / f"{network}.safetensors"))
        shape = NETWORKS[network].input_shape
        x = network_input(images[:batch], shape)
        y = torch.from_numpy(labels[:batch].astype(np.int64))

        train_mode = network in TRAIN_MODE

        def loss_of(out, target):
            return F.cross_entropy(out, target) if train_mode else F.nll_loss(out, target)

        def fresh(dtype=torch.float32, device="cpu"):
            model = NETWORKS[network]()
            model.load_state_dict(state)
            model.train(train_mode)  # resnet20: batch-norm on the batch; the MNIST nets: dropout off, as bench's step
            return model.to(device=device, dtype=dtype)

        def cpu_gradients(dtype):
            model = fresh(dtype)
            out = model(x.to(dtype))
            loss = loss_of(out, y)
            loss.backward()
            return ({k: p.grad.detach().double().numpy() for k, p in model.named_parameters()}, float(loss),
                    out.detach().double().numpy())

        probe = NETWORKS[network]()
        fp32_stats = peer in FP32_BATCH_STATS  # batch norm's statistics in fp32: our cpu_onednn step's allowance
        bound = 8 * math.sqrt(chain_length(probe, shape, batch, fp32_stats)) * 2.0 ** -24
        forward_bound = forward_tolerance(probe, shape, batch, fp32_stats)
        if gpu:
            try:
                _cuda_torch(torch)
                model = fresh(device="cuda")
                xd, yd = x.to("cuda"), y.to("cuda")
                step, gpu_gradients, label = _gpu_step(peer, model, xd, yd, torch, loss_of)
                with torch.no_grad():  # the graph's warm-up moved the weights: back to the committed ones
                    for k, p in model.named_parameters():
                        p.copy_(state[k].to(device="cuda", dtype=p.dtype))
                ours, loss32 = gpu_gradients()
                logits32 = None  # not held on the GPU: the loss alone (resnet20)
                torch.cuda.synchronize()
            except Exception as e:  # a mode PyTorch cannot build here: an error entry, the rest runs on
                session.fail(name, f"{type(e).__name__}: {e}".splitlines()[0], gpu)
                continue
        else:
            try:  # the timed model's own gradients, from the committed weights (compiled: at this shape)
                model = fresh()
                step, own_gradients, memory, words = _cpu_step(peer, model, x, y, torch, loss_of)
                ours, loss32, logits32 = own_gradients()
            except Exception as e:  # a mode PyTorch cannot build here (inductor without a compiler): an error entry
                session.fail(name, f"{type(e).__name__}: {e}".splitlines()[0])
                continue
            label = f"torch {torch.__version__} {words}, fp32, SGD momentum {MOMENTUM}, {session.threads} threads"
        exact, loss64, logits64 = cpu_gradients(torch.float64)
        worst, over = worst_gradient(ours, exact, None if train_mode else bound)
        problem = f"{over} of the largest gradient (bound {bound:.3g})" if over else ""
        if train_mode and not abs(loss32 - loss64) <= forward_bound * abs(loss64):
            problem = f"loss {loss32!r} against float64's {loss64!r} (bound {forward_bound:.3g} relative)"
        if train_mode and logits32 is not None and not problem:
            # the forward's bound is on the logits (kNetworkTolerance, relative
            # to the largest): a small loss can hide logits past it (resnet20
            # in channels_last at batch 256: loss 9.3e-6, logits 3.2e-5 off,
            # within forward_tolerance's fp32-statistics allowance there)
            off = float(np.max(np.abs(logits32 - logits64)) / max(float(np.max(np.abs(logits64))), 1e-300))
            if not off <= forward_bound:
                problem = f"logits {off:.3g} of the largest from float64's (bound {forward_bound:.3g}, the forward's)"
        if problem:
            if gpu and not train_mode:  # the gradients are what is held (resnet20: its loss)
                problem += diagnosis(torch, fresh, x, y, loss_of, exact, bound)
            session.fail(name, "WRONG RESULT: against float64: " + problem, gpu)
            continue

        counters = {"max_rel_err": worst}
        if not gpu:
            if memory is not None:  # the eager modes (see _cpu_step)
                counters.update(memory())
        elif peer == "peer_torch_cuda":
            try:  # unverified on hardware: a failure costs the counters, not the case
                eager = fresh(device="cuda")
                eager_opt = torch.optim.SGD(eager.parameters(), lr=LR, momentum=MOMENTUM)
                step_memory(eager, eager_opt, xd, yd, loss_of)  # the first step: cuDNN's and cuBLAS's first use
                counters.update(step_memory(eager, eager_opt, xd, yd, loss_of))
                del eager, eager_opt
            except Exception as e:
                print(f"peers: {name}: no memory counters ({type(e).__name__}: {e})".splitlines()[0],
                      file=sys.stderr)

        verify = None
        if peer in COMPILED:  # compiled at this shape by validation and the warm-up: nothing may compile now
            step()
            if gpu:
                torch.cuda.synchronize()
            verify = compile_watch(torch).problem
        session.measure(name, Prepared(step, lambda: None, label, verify), gpu=gpu, items_per_call=float(batch),
                        flops_per_call=step_flops(probe, shape) * batch, counters=counters)


def worst_gradient(ours: dict, exact: dict, bound: float | None = None) -> tuple[float, str]:
    """(max over tensors of max |g - g64| / max |g64|, the tensors past `bound`
    as 'name: error' pieces)."""
    worst, over = 0.0, []
    for k, g in exact.items():
        err = float(np.max(np.abs(ours[k] - g)) / max(float(np.max(np.abs(g))), 1e-300))
        worst = max(worst, err)
        if bound is not None and not err <= bound:
            over.append(f"{k}: {err:.3g}")
    return worst, "; ".join(over)


def diagnosis(torch, fresh, x, y, loss_of, exact: dict, bound: float, device: str = "cuda") -> str:
    """What a refused GPU step is refused for, in a few words for its error
    message: the fp32 settings in effect, and the same step's gradients
    with cuDNN off (PyTorch's own CUDA convolutions, im2col and cuBLAS,
    strict fp32): within the bound there, it is cuDNN's algorithm choice
    (FFT, Winograd) that moves them, not TF32 and not the step."""
    try:
        conv = getattr(torch.backends.cudnn, "conv", None)
        settings = (f"cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}, "
                    f"matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}"
                    + (f", cudnn.conv.fp32_precision={conv.fp32_precision}" if hasattr(conv, "fp32_precision") else ""))
        with torch.backends.cudnn.flags(enabled=False):
            model = fresh(device=device)
            loss_of(model(x.to(device)), y.to(device)).backward()
            native = {k: p.grad.detach().double().cpu().numpy() for k, p in model.named_parameters()}
        worst, over = worst_gradient(native, exact, bound)
        verdict = (f"within the bound ({worst:.3g}): cuDNN's algorithm choice, not TF32" if not over
                   else f"also off ({over})")
        return f" [{settings}; with cuDNN off: {verdict}]"
    except Exception as e:  # a diagnosis that cannot run costs its words, not the case's message
        return f" [no diagnosis: {type(e).__name__}: {e}]".splitlines()[0]


LOADED_NETWORKS = ("mnist_cnn",)  # bench/nn/train/train_loaded.cpp's
LOADED_WORKERS = (0, 1, 2)
LOAD_SEED = 20261126  # bench/cases/nn/train/loaded_train_case.cpp's kSeed


def training_loaded(session: Session) -> None:
    if session.problems.given:  # the loader's cases take no descriptor: a descriptor runs its problem alone
        return
    wanted = [(net, b, w) for net in LOADED_NETWORKS for b in BATCHES for w in LOADED_WORKERS
              if session.selected(f"{net}_train/peer_torch/batch:{b}/workers:{w}")]
    if not wanted or not session.have_torch("training peers"):
        return
    import time

    import torch
    from safetensors.torch import load_file

    from dlbench.epoch import augment_of, epoch_order
    from dlbench.nets import NETWORKS, load_fashion
    images, labels = load_fashion(DATA, "train")
    order = epoch_order(LOAD_SEED, len(images))
    torch.set_num_threads(session.threads)

    class Augmented(torch.utils.data.Dataset):
        """One image as kernels/nn/data/loader.cpp loads it (28 x 28 networks)."""

        def __init__(self, mean: float, std: float):
            self.value = ((np.arange(256, dtype=np.float32) / np.float32(255) - np.float32(mean))
                          / np.float32(std)).astype(np.float32)

        def __len__(self):
            return len(images)

        def __getitem__(self, index):
            dy, dx, flip = augment_of(LOAD_SEED, int(index))
            padded = np.zeros((36, 36), np.float32)
            padded[4:32, 4:32] = self.value[images[index]]
            crop = padded[dy : dy + 28, dx : dx + 28]
            if flip:
                crop = crop[:, ::-1]
            return torch.from_numpy(np.ascontiguousarray(crop)).unsqueeze(0), int(labels[index])

    for network, batch, workers in wanted:
        name = f"{network}_train/peer_torch/batch:{batch}/workers:{workers}"
        if session.out_of_time([name]):
            continue
        weights = MODELS / f"{network}.safetensors"
        state = load_file(str(weights))
        from safetensors import safe_open

        with safe_open(str(weights), "np") as f:
            meta = f.metadata()
        shape = NETWORKS[network].input_shape
        loader = torch.utils.data.DataLoader(
            Augmented(float(meta["input_mean"]), float(meta["input_std"])), batch_size=batch,
            sampler=order.tolist(), num_workers=workers, drop_last=True,
            prefetch_factor=2 if workers > 0 else None, persistent_workers=workers > 0)
        batches = iter(loader)
        x0, y0 = next(batches)

        def gradients(dtype):
            model = NETWORKS[network]()
            model.load_state_dict(state)
            model.eval()
            model.to(dtype)
            loss = torch.nn.functional.nll_loss(model(x0.to(dtype)), y0)
            loss.backward()
            return {k: p.grad.detach().double().numpy() for k, p in model.named_parameters()}, float(loss)

        # Held: the loss against float64 (the forward's fp32 bound). Reported,
        # not held: the gradients' error relative to the largest gradient
        # (max_rel_err). That form cannot hold on the loader's batches: on
        # cropped and flipped images conv2's gradients cancel far below their
        # magnitudes, and PyTorch's own fp32 gradients were 1.5e-3 of the
        # largest gradient from float64's at batch 256 (bound 2.0e-4), as
        # resnet20's are on plain images (see the module's docstring).
        (ours, loss32), (exact, loss64) = gradients(torch.float32), gradients(torch.float64)
        probe = NETWORKS[network]()
        worst = 0.0
        for k, g in exact.items():
            worst = max(worst, float(np.max(np.abs(ours[k] - g)) / max(float(np.max(np.abs(g))), 1e-300)))
        if not abs(loss32 - loss64) <= LOSS_TOLERANCE * abs(loss64):
            session.fail(name, f"WRONG RESULT: loss on the first batch {loss32!r} against float64's {loss64!r} "
                               f"(bound {LOSS_TOLERANCE} relative)")
            continue

        model = NETWORKS[network]()
        model.load_state_dict(state)
        model.eval()
        opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
        totals = {"load_us": 0.0, "forward_us": 0.0, "backward_us": 0.0, "optimizer_us": 0.0}
        counters = {"max_rel_err": worst, **totals,
                    **step_memory(model, opt, x0, y0, torch.nn.functional.nll_loss)}
        calls = 0

        def step():
            nonlocal batches, calls
            t0 = time.perf_counter()
            try:
                x, y = next(batches)
            except StopIteration:  # the next pass over the order
                batches = iter(loader)
                x, y = next(batches)
            t1 = time.perf_counter()
            loss = torch.nn.functional.nll_loss(model(x), y)
            t2 = time.perf_counter()
            loss.backward()
            t3 = time.perf_counter()
            opt.step()
            opt.zero_grad(set_to_none=True)
            t4 = time.perf_counter()
            calls += 1
            for key, seconds in (("load_us", t1 - t0), ("forward_us", t2 - t1), ("backward_us", t3 - t2),
                                 ("optimizer_us", t4 - t3)):
                totals[key] += seconds * 1e6
                counters[key] = totals[key] / calls  # read by measure() once every repetition is done

        label = (f"torch {torch.__version__} eager, fp32, SGD momentum {MOMENTUM}, {session.threads} threads, "
                 f"DataLoader num_workers={workers}, crop (pad 4) + flip")
        session.measure(name, Prepared(step, lambda: None, label), items_per_call=float(batch),
                        flops_per_call=step_flops(probe, shape) * batch, counters=counters)
        del batches, loader
