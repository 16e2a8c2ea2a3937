"""Network peers: resnet20, mnist_cnn and mnist_lenet in what users would run
instead, with the committed safetensors weights loaded into the PyTorch
modules of dlbench.nets (the ONNX and OpenVINO models exported from them):

    <net>/peer_torch/batch:<b>                PyTorch eager, torch.inference_mode()
    <net>/peer_torchscript/batch:<b>          torch.jit.trace + torch.jit.freeze
    <net>/peer_torch_compile/batch:<b>        torch.compile (inductor, default mode, dynamic=False)
    <net>/peer_ort/batch:<b>                  ONNX Runtime, CPU EP, ORT_ENABLE_ALL
    <net>/peer_openvino/batch:<b>             OpenVINO, CPU, INFERENCE_PRECISION_HINT f32
                                              (LATENCY hint: one request on every thread)
    <net>/peer_openvino_tput/batch:<b>        the same with the THROUGHPUT hint, as
                                              benchmark_app -hint throughput: its optimal
                                              number of requests in flight at once, each a
                                              batch (images/s counts them all)
    <net>/peer_openvino_bf16/batch:<b>        OpenVINO, CPU, its default precision where that
                                              is bf16 (CPUs with native bf16; skipped elsewhere)
  on a GPU (batch 1024 too), strict fp32 (TF32 off), cudnn.benchmark off
  except where the name says otherwise:
    <net>/peer_torch_cuda/batch:<b>           eager
    <net>/peer_torch_cudnn_benchmark/batch:<b>  eager with the cuDNN autotuner
    <net>/peer_torch_cuda_graph/batch:<b>     the eager pass captured in a CUDA graph, replayed
    <net>/peer_torch_cuda_graph_tf32/batch:<b>  the same with PyTorch's defaults: TF32 allowed
                                              for cuDNN's convolutions (not for matmul, as it ships)
    <net>/peer_torch_cuda_compile/batch:<b>   torch.compile(mode="reduce-overhead", dynamic=False):
                                              inductor's kernels in CUDA graphs (cudagraph trees)
    <net>/peer_ort_cuda/batch:<b>             ONNX Runtime's CUDA EP where installed (host in/out)
  and in fp16 (weights and activations; the pass takes the fp32 input and
  gives fp32 logits, casting inside it, as bench's gpu_cudnn_f16 does; fp32
  accumulation: reduced-precision reductions off), each also in
  channels_last (weights and input, NHWC in memory: the layout PyTorch's
  tensor-core convolutions want), a mode of its own whose name ends in _cl:
    <net>/peer_torch_cuda_f16[_cl]/batch:<b>          eager
    <net>/peer_torch_cuda_graph_f16[_cl]/batch:<b>    CUDA graph of the eager pass
    <net>/peer_torch_cuda_compile_f16[_cl]/batch:<b>  torch.compile(mode="reduce-overhead")
  (the compiled, channels_last and tf32 modes are unverified on hardware
  until the next device run). A compiled peer has a compiled module per
  batch size it runs (dynamic=False, as a server with fixed batches),
  compiled and warmed up at that shape before its timed loop, and is
  validated at the largest batch it is timed at, so that validation
  compiles no shape of its own; a compilation inside the timed loop (dynamo's
  counters move) refuses the case; the compiled peers run after the others
  (wanted_cases).

Validation, as bench's network cases: the outputs for PyTorch's 256
reference images against the committed reference logits (max_rel_err; fp32
bound 1e-5, bf16 1e-2, fp16 the bound of bench's 16-bit rows, see
tolerance_for), then top-1 over the 10,000 test images against PyTorch's
committed predictions (fp32: at most 5 differ; bf16, fp16 and tf32: at most
1%; tf32's logit bound: tolerance_for).
A peer that fails gets an error entry, no time. Counters: items_per_second,
flops, accuracy, accuracy_drop, torch_disagreements, max_rel_err, and at
batch 1 latency_p50_us/p90/p99. GPU peers time the pass on device-resident
input with CUDA events (ORT's CUDA EP: its run, host input and output)."""

from __future__ import annotations

import io
import math
import os
from collections import Counter
from pathlib import Path

import numpy as np

from dlbench.peers.harness import (PeerUnavailable, Prepared, Session, compile_watch, no_recompile_limit,
                                   set_fp32_math)

ROOT = Path(__file__).resolve().parents[3]
# bench's $DLB_MODELS_DIR (the GPU kit sets it to the models it carries), else the committed ones
MODELS = Path(os.environ.get("DLB_MODELS_DIR") or ROOT / "models" / "fashion-mnist")
DATA = Path(os.environ.get("DLB_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
NETWORK_NAMES = ("resnet20", "mnist_cnn", "mnist_lenet")  # dlbench.nets.NETWORKS, without importing torch
CPU_BATCHES = (1, 16, 64, 256)
GPU_BATCHES = CPU_BATCHES + (1024,)
# kernels/nn/infer/nn.cpp kNetworkTolerance, kBf16Tolerance; bench/cases/nn/infer/nn_case.h kMaxDisagreements and
# max_disagreement_fraction (reduced precision: 1% of the images)
TOLERANCE = {"fp32": 1e-5, "bf16": 1e-2}
MAX_DISAGREEMENTS = 5
MAX_DISAGREEMENT_FRACTION = 0.01
# The layers of each network as kernels/nn/model/network.cpp builds it (a conv with
# its batch norm, ReLU and shortcut, an fc, a pooling, the log-softmax: one
# layer each), the L of bench's 16-bit bound; test_peers checks them against
# bench's <net>_layer cases.
LAYERS = {"resnet20": 23, "mnist_cnn": 6, "mnist_lenet": 7}
# fp16 peers: PyTorch rounds to fp16 up to 3 times per layer, one more than
# bench's GPU 16-bit rows (see tolerance_for).
F16_ROUNDINGS_PER_LAYER = 3
F16_SIGNIFICANT_BITS = 11
# tf32 peers: each convolution reads both operands at TF32 (see tolerance_for)
TF32_ROUNDINGS_PER_LAYER = 2
TF32_SIGNIFICANT_BITS = 10


def sixteen_bit_tolerance(roundings_per_layer: int, significant_bits: int, layers: int) -> float:
    """kernels/nn/infer/nn.cpp's sixteen_bit_tolerance: k roundings per layer through
    L layers, each off by at most the unit roundoff u = 2^-bits, independent
    roundings adding up to about sqrt(k L) u."""
    return math.sqrt(roundings_per_layer * layers) * 2.0 ** -significant_bits


def tolerance_for(precision: str, network: str) -> float:
    """The logit bound a peer of this precision is held to on this network:
    bench's flat fp32 (and bf16) bounds, and for fp16 bench's 16-bit rule
    (what the rows' problem_tolerance gives) with PyTorch's roundings.

    Error analysis of the fp16 peers. They run model.half(): weights, biases
    and batch-norm parameters rounded to fp16 once, activations stored in
    fp16 between kernels; convolutions (cuDNN: PyTorch's descriptor asks
    for fp32 math on fp16 data, ATen/cudnn/Descriptors.h) and fc (cuBLAS,
    with allow_fp16_reduced_precision_reduction off) accumulate in fp32 and
    round their sum once, as bench's gpu_cudnn_f16 does. Where bench's rows
    round twice per layer (the raw sum, then the epilogue of bias, shortcut
    and ReLU: k = 2), eager PyTorch rounds up to three times: the conv's sum,
    the batch norm (a kernel of its own, not folded) or the bias add, and the
    shortcut add (ReLU and max-pooling are exact, log-softmax rounds once
    and is a layer of its own). The input's cast to fp16 is one more
    rounding at the first layer, within the same count. CUDA graphs replay
    the eager kernels (same roundings); torch.compile fuses batch norm,
    shortcut and ReLU into one kernel that rounds once (k = 2), so k = 3
    bounds all three modes. resnet20 (L = 23): sqrt(69) 2^-11 = 4.1e-3;
    mnist_cnn (L = 6): 2.1e-3; mnist_lenet (L = 7): 2.2e-3. bench's
    gpu_cudnn_f16 measured 1.3e-3 on resnet20 on an H100 against its bound of
    3.2e-3; a wrong layer moves the logits by 1e-1 or more. As for bench's
    16-bit rows, the top-1 check (at most 1% of the test images differ from
    PyTorch's fp32 answers) is what holds the row; the bound catches gross
    errors. Unmeasured for the peers until the next device run.

    Error analysis of the tf32 peers (PyTorch's defaults: cuDNN may run fp32
    convolutions on TF32 tensor cores; matrix products stay fp32). A TF32
    convolution reads each operand, the activation and the weight, with a
    10-bit mantissa: 11 significant bits where the hardware rounds to
    nearest, 10 where it drops the rest of the mantissa (PyTorch's notes say
    "only the first 10 bits of the input mantissa are read"), so the bound
    takes u = 2^-10, the worse of the two. That is 2 roundings per layer
    (k = 2); the products are exact in the fp32 accumulator, and the sum,
    batch norm, shortcut add and fc are fp32 (2^-24: nothing at this
    scale). Counting every layer of L as a convolution over-counts (pooling,
    the fc and log-softmax read nothing at TF32), which keeps the bound an
    upper one: resnet20 sqrt(46) 2^-10 = 6.6e-3, mnist_cnn 3.4e-3,
    mnist_lenet 3.7e-3, all under the 1e-2 that a wrong layer exceeds. As
    for the 16-bit rows, top-1 on the test images (at most 1% differing)
    holds the row. Unmeasured on hardware until the next device run."""
    if precision == "fp16":
        return sixteen_bit_tolerance(F16_ROUNDINGS_PER_LAYER, F16_SIGNIFICANT_BITS, LAYERS[network])
    if precision == "tf32":
        return sixteen_bit_tolerance(TF32_ROUNDINGS_PER_LAYER, TF32_SIGNIFICANT_BITS, LAYERS[network])
    return TOLERANCE[precision]


class Peer:
    """A network in one framework: predict(x) for any batch (NumPy in, logits
    out), and timed(x) -> a closure that runs one pass on x as the case times it.
    static_shapes: each batch size costs a compilation, so the peer is
    validated at a batch size it is timed at (not at 64 and 100)."""

    def __init__(self, predict, label: str, timed=None, static_shapes: bool = False, watch=None,
                 batches_per_call: int = 1):
        self.predict = predict
        self.batches_per_call = batches_per_call  # timed(x) runs this many batches at once
        self.label = label
        self._timed = timed
        self.static_shapes = static_shapes
        self.watch = watch  # a compiled peer: () -> a CompileWatch taken just before its timed loop

    def timed(self, x: np.ndarray):
        return self._timed(x) if self._timed else (lambda: self.predict(x))


def _onnx_bytes(model, example) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.onnx.export(model, torch.from_numpy(example), buffer, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=17, dynamo=False)
    return buffer.getvalue()


def _torch_version(torch) -> str:
    return torch.__version__.split("+")[0]


def make_torch(model, example, threads):
    import torch

    def predict(x):
        with torch.inference_mode():
            return model(torch.from_numpy(x)).numpy()

    return Peer(predict, f"torch {_torch_version(torch)} eager, inference_mode, fp32")


def make_torchscript(model, example, threads):
    import torch

    with torch.inference_mode():
        frozen = torch.jit.freeze(torch.jit.trace(model, torch.from_numpy(example)).eval())

    def predict(x):
        with torch.inference_mode():
            return frozen(torch.from_numpy(x)).numpy()

    return Peer(predict, f"torch {_torch_version(torch)} jit.trace + jit.freeze, fp32")


def make_torch_compile(model, example, threads):
    import torch

    torch._dynamo.reset()
    no_recompile_limit(torch)
    compiled = torch.compile(model, dynamic=False)  # a graph per batch size, as a server with fixed batches

    def predict(x):
        with torch.inference_mode():
            return compiled(torch.from_numpy(x)).numpy()

    def timed(x):
        xt = torch.from_numpy(x)

        def run():
            with torch.inference_mode():
                compiled(xt)
        run()  # compiled at this shape before its timed loop
        return run

    return Peer(predict, f"torch {_torch_version(torch)} torch.compile (inductor, default mode, dynamic=False), fp32",
                timed, watch=lambda: compile_watch(torch))


def make_ort(model, example, threads, provider="CPUExecutionProvider"):
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise PeerUnavailable(f"onnxruntime not installed ({e})") from None
    if provider not in ort.get_available_providers():
        raise PeerUnavailable(f"onnxruntime {ort.__version__} has no {provider}")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(_onnx_bytes(model, example), options, providers=[provider])

    def predict(x):
        return session.run(["y"], {"x": x})[0]

    where = "CPU EP" if provider == "CPUExecutionProvider" else "CUDA EP, host input and output"
    return Peer(predict, f"onnxruntime {ort.__version__} {where}, ORT_ENABLE_ALL, fp32")


def openvino_primitives(compiled) -> str:
    """The kernels OpenVINO chose for the convolutions and fully connected
    layers, e.g. 'Convolution brgconv_avx512_bf16 x19': what says which ISA ran."""
    found = Counter()
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if "layerType" in info and "primitiveType" in info:
            layer = info["layerType"].astype(str)
            if layer in ("Convolution", "FullyConnected", "MatMul"):
                found[f"{layer} {info['primitiveType'].astype(str)}"] += 1
    return ", ".join(f"{k} x{v}" for k, v in sorted(found.items()))


def _make_openvino(precision: str, hint: str = "LATENCY"):
    def make(model, example, threads):
        try:
            import openvino as ov
        except ImportError as e:
            raise PeerUnavailable(f"openvino not installed ({e})") from None
        core = ov.Core()
        config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": hint}
        if precision == "fp32":
            config["INFERENCE_PRECISION_HINT"] = "f32"
        compiled = core.compile_model(core.read_model(_onnx_bytes(model, example)), "CPU", config)
        ran = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        if precision == "bf16" and ran != "bf16":
            raise PeerUnavailable(f"OpenVINO's default precision on this CPU is {ran}, not bf16 "
                                  "(peer_openvino runs f32)")
        request = compiled.create_infer_request()

        def predict(x):
            return request.infer({0: x})[compiled.output(0)].copy()

        how = "INFERENCE_PRECISION_HINT f32" if precision == "fp32" else "its default precision (no hint)"
        label = f"openvino {ov.__version__.split('-')[0]} CPU, {how}: {ran}, {hint} hint"
        if hint != "THROUGHPUT":
            return Peer(predict, f"{label}; {openvino_primitives(compiled)}")
        # What the hint is for: several requests in flight, one per stream
        # the hint chose (benchmark_app's -hint throughput), each on a copy
        # of the batch; a timed call waits for all of them.
        n = int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        requests = [compiled.create_infer_request() for _ in range(n)]

        def timed(x):
            def run():
                for r in requests:
                    r.start_async({0: x})
                for r in requests:
                    r.wait()
            return run

        streams = compiled.get_property("NUM_STREAMS")
        return Peer(predict, f"{label}: {n} requests in flight, {streams} streams; {openvino_primitives(compiled)}",
                    timed=timed, batches_per_call=n)
    return make


def _cuda_torch(torch, precision: str = "fp32") -> str:
    """Strict fp32 (TF32 off, as bench's GPU rows) except in the tf32 modes
    (PyTorch's defaults); fp16 products accumulate in fp32 throughout, as
    bench's 16-bit rows (set_fp32_math)."""
    return set_fp32_math(torch, tf32=precision == "tf32")


def _on_gpu(model, f16: bool, channels_last: bool = False):
    """The module on the GPU; in fp16, wrapped so that it takes the fp32 input
    and gives fp32 logits (the casts inside the pass, as bench's f16 rows);
    channels_last: its 4-d weights in channels_last (NHWC in memory), the
    layout PyTorch's tensor-core convolutions want (the input is made
    channels_last by _device_input, and x.half() keeps its layout)."""
    import torch

    gpu_model = model.to("cuda")
    if channels_last:
        gpu_model = gpu_model.to(memory_format=torch.channels_last)
    if not f16:
        return gpu_model

    class Half(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net.half()

        def forward(self, x):
            return self.net(x.half()).float()

    return Half(gpu_model).eval()


def _device_input(torch, x: np.ndarray, channels_last: bool = False):
    """x on the GPU, in channels_last where the mode runs in it (a user's
    channels_last pipeline hands the network its input in that layout)."""
    xd = torch.from_numpy(x).to("cuda")
    return xd.contiguous(memory_format=torch.channels_last) if channels_last else xd


def _precision_words(precision: str, channels_last: bool = False, math: str = "TF32 off") -> str:
    words = {"fp16": "fp16 (fp32 in and out, fp32 accumulation)", "fp32": f"{math}, fp32",
             "tf32": f"fp32 with {math}"}[precision]
    return words + (", channels_last" if channels_last else "")


def _make_torch_cuda(benchmark: bool, precision: str = "fp32", channels_last: bool = False):
    f16 = precision == "fp16"

    def make(model, example, threads):
        import torch

        math = _cuda_torch(torch, precision)
        torch.backends.cudnn.benchmark = benchmark
        gpu_model = _on_gpu(model, f16, channels_last)

        def predict(x):
            with torch.inference_mode():
                return gpu_model(_device_input(torch, x, channels_last)).cpu().numpy()

        def timed(x):
            xd = _device_input(torch, x, channels_last)

            def run():
                with torch.inference_mode():
                    gpu_model(xd)
            return run

        how = "cudnn.benchmark on (autotuner)" if benchmark else "cudnn.benchmark off"
        return Peer(predict, f"torch {_torch_version(torch)} eager on the GPU, {how}, "
                             f"{_precision_words(precision, channels_last, math)}", timed)
    return make


def _make_torch_cuda_graph(precision: str = "fp32", channels_last: bool = False):
    f16 = precision == "fp16"

    def make(model, example, threads):
        """The eager pass captured once per batch size into a CUDA graph (static
        input and output buffers), replayed: what removing per-layer launch
        overhead buys, as bench's gpu_cudnn_graph."""
        import torch

        math = _cuda_torch(torch, precision)
        torch.backends.cudnn.benchmark = False
        gpu_model = _on_gpu(model, f16, channels_last)
        graphs = {}

        def graph_for(batch):
            if batch not in graphs:
                static_x = torch.zeros((batch, *example.shape[1:]), device="cuda")
                if channels_last:  # copy_ into it keeps this layout
                    static_x = static_x.contiguous(memory_format=torch.channels_last)
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side), torch.inference_mode():
                    for _ in range(3):  # warm-up outside the capture (cuDNN handles, workspaces)
                        gpu_model(static_x)
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph), torch.inference_mode():
                    static_y = gpu_model(static_x)
                graphs[batch] = (graph, static_x, static_y)
            return graphs[batch]

        def predict(x):
            graph, static_x, static_y = graph_for(len(x))
            static_x.copy_(torch.from_numpy(x))
            graph.replay()
            return static_y.cpu().numpy()

        def timed(x):
            graph, static_x, _ = graph_for(len(x))
            static_x.copy_(torch.from_numpy(x))
            return graph.replay

        return Peer(predict, f"torch {_torch_version(torch)} CUDA graph of the eager pass, replayed, "
                             f"{_precision_words(precision, channels_last, math)}", timed)
    return make


# Calls of a compiled pass at its timed shape before the timed loop: the
# first compiles (where validation did not), cudagraph trees record the CUDA
# graph on a later one (the first runs warm), then it replays.
COMPILE_WARMUP_CALLS = 3


def _make_torch_cuda_compile(precision: str = "fp32", channels_last: bool = False):
    f16 = precision == "fp16"

    def make(model, example, threads):
        """torch.compile(mode="reduce-overhead"): inductor's fused kernels
        (convolutions through cuDNN, the rest generated in Triton), the pass
        recorded in CUDA graphs by cudagraph trees and replayed. One compiled
        module per batch size (dynamic=False: static shapes, no symbolic
        batch), compiled and warmed up at that batch's exact input shape
        before its timed loop (validation uses the largest batch's module);
        dynamo's recompile limit raised above any count of batch sizes, so
        none falls back to eager; and a compilation inside the timed loop
        refuses the case (harness.CompileWatch) instead of timing it."""
        import torch

        math = _cuda_torch(torch, precision)
        torch.backends.cudnn.benchmark = False
        torch._dynamo.reset()
        no_recompile_limit(torch)
        gpu_model = _on_gpu(model, f16, channels_last)
        compiled = {}

        def module_for(batch):
            if batch not in compiled:
                compiled[batch] = torch.compile(gpu_model, mode="reduce-overhead", dynamic=False)
            return compiled[batch]

        def predict(x):
            with torch.inference_mode():
                return module_for(len(x))(_device_input(torch, x, channels_last)).cpu().numpy()

        def timed(x):
            xd = _device_input(torch, x, channels_last)
            module = module_for(len(x))

            def run():
                with torch.inference_mode():
                    module(xd)
            for _ in range(COMPILE_WARMUP_CALLS):
                run()
            torch.cuda.synchronize()
            return run

        return Peer(predict, f"torch {_torch_version(torch)} torch.compile(mode=reduce-overhead, dynamic=False) "
                             f"on the GPU (inductor, CUDA graphs), a compiled module per batch size, "
                             f"cudnn.benchmark off, {_precision_words(precision, channels_last, math)}",
                    timed, static_shapes=True, watch=lambda: compile_watch(torch))
    return make


# peer -> (gpu, precision, make), the precision in dlbench.names' words (what
# precision_of reads off the name: a test holds the two together); the order
# is the order they run in (the GPU's cheap modes first, the autotuner's and ONNX Runtime's after them,
# the compiled ones last: see _run_order)
PEERS = {
    "peer_torch": (False, "fp32", make_torch),
    "peer_torchscript": (False, "fp32", make_torchscript),
    "peer_torch_compile": (False, "fp32", make_torch_compile),
    "peer_ort": (False, "fp32", make_ort),
    "peer_openvino": (False, "fp32", _make_openvino("fp32")),
    "peer_openvino_tput": (False, "fp32", _make_openvino("fp32", "THROUGHPUT")),
    "peer_openvino_bf16": (False, "bf16", _make_openvino("bf16")),
    "peer_torch_cuda": (True, "fp32", _make_torch_cuda(False)),
    "peer_torch_cudnn_benchmark": (True, "fp32", _make_torch_cuda(True)),
    "peer_torch_cuda_graph": (True, "fp32", _make_torch_cuda_graph()),
    "peer_torch_cuda_graph_tf32": (True, "tf32", _make_torch_cuda_graph("tf32")),
    "peer_torch_cuda_f16": (True, "fp16", _make_torch_cuda(False, "fp16")),
    "peer_torch_cuda_f16_cl": (True, "fp16", _make_torch_cuda(False, "fp16", channels_last=True)),
    "peer_torch_cuda_graph_f16": (True, "fp16", _make_torch_cuda_graph("fp16")),
    "peer_torch_cuda_graph_f16_cl": (True, "fp16", _make_torch_cuda_graph("fp16", channels_last=True)),
    "peer_ort_cuda": (True, "fp32", lambda m, e, t: make_ort(m, e, t, "CUDAExecutionProvider")),
    "peer_torch_cuda_compile": (True, "fp32", _make_torch_cuda_compile()),
    "peer_torch_cuda_compile_f16": (True, "fp16", _make_torch_cuda_compile("fp16")),
    "peer_torch_cuda_compile_f16_cl": (True, "fp16", _make_torch_cuda_compile("fp16", channels_last=True)),
}


def macs_per_image(model, shape) -> float:
    """2 x MACs counted from the modules (conv and linear), as the C++ side does."""
    import torch

    total = 0.0
    hooks = []

    def count(module, inputs, output):
        nonlocal total
        if isinstance(module, torch.nn.Conv2d):
            total += output.numel() * module.in_channels * module.kernel_size[0] * module.kernel_size[1]
        elif isinstance(module, torch.nn.Linear):
            total += output.numel() * module.in_features

    for m in model.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            hooks.append(m.register_forward_hook(count))
    with torch.inference_mode():
        model(torch.zeros(1, *shape))
    for h in hooks:
        h.remove()
    return total


def _outputs(peer: Peer, x: np.ndarray, chunk: int) -> np.ndarray:
    """The peer's logits for every image of x, in batches of exactly `chunk`
    (the last one filled up from the start of x, its extra rows dropped)."""
    out = [peer.predict(np.ascontiguousarray(x[np.arange(i, i + chunk) % len(x)])) for i in range(0, len(x), chunk)]
    return np.concatenate(out)[:len(x)]


def _validate(peer: Peer, precision: str, test_x, labels, ref_logits, ref_predictions, tolerance: float | None = None,
              chunk: int | None = None):
    """(problem or None, counters) for a peer: its logits on the reference
    images, then its top-1 on the whole test set; with `chunk`, both from one
    pass over the test set in batches of that size (a peer compiled per
    batch size: no shape of the validation's own)."""
    tolerance = TOLERANCE[precision] if tolerance is None else tolerance
    if chunk is None:
        out = np.concatenate([peer.predict(test_x[i:i + 64]) for i in range(0, len(ref_logits), 64)])
        predictions = np.concatenate([peer.predict(test_x[i:i + 100]).argmax(1) for i in range(0, len(test_x), 100)])
    else:
        every = _outputs(peer, test_x, chunk)
        out, predictions = every[:len(ref_logits)], every.argmax(1)
    err = float(np.abs(out - ref_logits).max() / np.abs(ref_logits).max())
    accuracy = float((predictions == labels).mean())
    disagreements = int((predictions != ref_predictions).sum())
    allowed = (MAX_DISAGREEMENTS if precision == "fp32"
               else max(MAX_DISAGREEMENTS, math.ceil(MAX_DISAGREEMENT_FRACTION * len(test_x))))
    counters = {"accuracy": accuracy, "accuracy_drop": float((ref_predictions == labels).mean()) - accuracy,
                "max_rel_err": err, "torch_disagreements": float(disagreements)}
    if not err <= tolerance:
        return f"max_rel_err {err:.3g} against PyTorch's reference logits (tolerance {tolerance:.3g})", counters
    if disagreements > allowed:
        return f"top-1 differs from PyTorch's on {disagreements} test images (at most {allowed})", counters
    return None, counters


# Seconds of compilation per batch size each: they run after the others.
COMPILED = ("peer_torch_compile", "peer_torch_cuda_compile", "peer_torch_cuda_compile_f16",
            "peer_torch_cuda_compile_f16_cl")


def _run_order(case: tuple[str, str, int]) -> tuple:
    net, peer, _ = case
    n, p = NETWORK_NAMES.index(net), list(PEERS).index(peer)
    return (1, n, p) if peer in COMPILED else (0, p, n)


def wanted_cases(session: Session) -> list[tuple[str, str, int]]:
    """(network, peer, batch) of every selected case, in the order they run:
    peer by peer (PEERS' order), each over the networks; then the compiled
    peers network by network (resnet20's in fp32 and fp16, then mnist_cnn's,
    then mnist_lenet's), so that a time budget that runs out leaves out the
    costliest cases of the least important network first."""
    given = session.problems
    cases = [(net, p, b) for p, (gpu, _, _) in PEERS.items() for net in NETWORK_NAMES
             for b in (given.networks.get(net, []) if given.given else GPU_BATCHES if gpu else CPU_BATCHES)
             if session.selected(f"{net}/{p}/batch:{b}", gpu)]
    return sorted(cases, key=_run_order)  # stable: the batches in order (a descriptor's: as given)


def networks(session: Session, compiled: bool | None = None) -> None:
    """The selected network peers; compiled: only the compiled peers (True),
    only the others (False), or all (None)."""
    wanted_all = [c for c in wanted_cases(session) if compiled is None or (c[1] in COMPILED) == compiled]
    if not wanted_all or not session.have_torch("network peers"):  # the peers below need torch: checked once
        return
    from safetensors import safe_open
    from safetensors.torch import load_file

    from dlbench.nets import NETWORKS, load_fashion, network_input
    images, labels = load_fashion(DATA, "test")
    loaded = {}

    def load(network):
        """(model, test_x, ref_logits, ref_predictions, flops per image), once per network."""
        if network not in loaded:
            weights = MODELS / f"{network}.safetensors"
            reference = load_file(str(MODELS / f"{network}.reference.safetensors"))
            if not np.array_equal(reference["labels"].numpy(), labels):
                raise SystemExit(f"peers: the reference of {network} was made on other test labels than {DATA}")
            with safe_open(str(weights), "pt") as f:
                meta = f.metadata()
            model = NETWORKS[network]()
            model.load_state_dict(load_file(str(weights)))
            model.eval()
            shape = model.input_shape
            test_x = network_input(images, shape, float(meta["input_mean"]), float(meta["input_std"])).numpy()
            loaded[network] = (model, test_x, reference["logits"].double().numpy(), reference["predictions"].numpy(),
                               2 * macs_per_image(model, shape))
        return loaded[network]

    for network, peer_name in dict.fromkeys((net, p) for net, p, _ in wanted_all):
        batches = [b for net, p, b in wanted_all if (net, p) == (network, peer_name)]
        gpu, precision, make = PEERS[peer_name]
        names = [f"{network}/{peer_name}/batch:{b}" for b in batches]
        if session.out_of_time(names, gpu):
            continue
        model, test_x, ref_logits, ref_predictions, flops = load(network)
        fresh = NETWORKS[network]()  # each peer its own copy: .to('cuda'), .half() and compile change a module
        fresh.load_state_dict(model.state_dict())
        fresh.eval()
        peer = session.prepare(peer_name, make, fresh, test_x[:1], session.threads)
        if peer is None:
            continue
        problem, counters = _validate(peer, precision, test_x, labels, ref_logits, ref_predictions,
                                      tolerance_for(precision, network),
                                      chunk=max(batches) if peer.static_shapes else None)
        for b, name in zip(batches, names):
            if problem:
                session.fail(name, problem, gpu)
                continue
            x = np.ascontiguousarray(test_x[np.arange(b) % len(test_x)])
            if session.out_of_time([name], gpu):
                continue
            run = peer.timed(x)  # a compiled peer compiles and warms up at this shape here, before the watch
            verify = peer.watch().problem if peer.watch else None
            session.measure(name, Prepared(run, lambda: None, peer.label, verify), gpu=gpu,
                            items_per_call=float(b * peer.batches_per_call),
                            flops_per_call=flops * b * peer.batches_per_call, counters=counters,
                            latency=b == 1 and peer.batches_per_call == 1)
