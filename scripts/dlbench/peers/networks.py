"""Network peers: resnet20, mnist_cnn and mnist_lenet in what users would run
instead, with the committed safetensors weights loaded into the PyTorch
modules of dlbench.nets (the ONNX and OpenVINO models exported from them):

    <net>/peer_torch/batch:<b>                PyTorch eager, torch.inference_mode()
    <net>/peer_torchscript/batch:<b>          torch.jit.trace + torch.jit.freeze
    <net>/peer_torch_compile/batch:<b>        torch.compile (inductor, default mode, dynamic=False)
    <net>/peer_ort/batch:<b>                  ONNX Runtime, CPU EP, ORT_ENABLE_ALL
    <net>/peer_openvino/batch:<b>             OpenVINO, CPU, INFERENCE_PRECISION_HINT f32
    <net>/peer_openvino_bf16/batch:<b>        OpenVINO, CPU, its default precision where that
                                              is bf16 (CPUs with native bf16; skipped elsewhere)
  on a GPU (batch 1024 too), strict fp32 (TF32 off):
    <net>/peer_torch_cuda/batch:<b>           eager, cudnn.benchmark off
    <net>/peer_torch_cudnn_benchmark/batch:<b>  eager with the cuDNN autotuner
    <net>/peer_torch_cuda_graph/batch:<b>     the eager pass captured in a CUDA graph, replayed
    <net>/peer_ort_cuda/batch:<b>             ONNX Runtime's CUDA EP where installed (host in/out)

Validation, as bench's network cases: the outputs for PyTorch's 256
reference images against the committed reference logits (max_rel_err; fp32
bound 1e-5, bf16 1e-2), then top-1 over the 10,000 test images against
PyTorch's committed predictions (fp32: at most 5 differ; bf16: at most 1%).
A peer that fails gets an error entry, no time. Counters: items_per_second,
flops, accuracy, accuracy_drop, torch_disagreements, max_rel_err, and at
batch 1 latency_p50_us/p90/p99. GPU peers time the pass on device-resident
input with CUDA events (ORT's CUDA EP: its run, host input and output)."""

from __future__ import annotations

import io
import os
from collections import Counter
from pathlib import Path

import numpy as np

from dlbench.peers.harness import PeerUnavailable, Prepared, Session

ROOT = Path(__file__).resolve().parents[3]
MODELS = ROOT / "models" / "fashion-mnist"
DATA = Path(os.environ.get("DLB_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
NETWORK_NAMES = ("resnet20", "mnist_cnn", "mnist_lenet")  # dlbench.nets.NETWORKS, without importing torch
CPU_BATCHES = (1, 16, 64, 256)
GPU_BATCHES = CPU_BATCHES + (1024,)
# kernels/nn/nn.cpp kNetworkTolerance, kBf16Tolerance; bench/cases/nn_case.h kMaxDisagreements and
# max_disagreement_fraction (reduced precision: 1% of the images)
TOLERANCE = {"f32": 1e-5, "bf16": 1e-2}
MAX_DISAGREEMENTS = 5
MAX_DISAGREEMENT_FRACTION = 0.01


class Peer:
    """A network in one framework: predict(x) for any batch (NumPy in, logits
    out), and timed(x) -> a closure that runs one pass on x as the case times it."""

    def __init__(self, predict, label: str, timed=None):
        self.predict = predict
        self.label = label
        self._timed = timed

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
    compiled = torch.compile(model, dynamic=False)  # a graph per batch size, as a server with fixed batches

    def predict(x):
        with torch.inference_mode():
            return compiled(torch.from_numpy(x)).numpy()

    return Peer(predict, f"torch {_torch_version(torch)} torch.compile (inductor, default mode, dynamic=False), fp32")


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


def _make_openvino(precision: str):
    def make(model, example, threads):
        try:
            import openvino as ov
        except ImportError as e:
            raise PeerUnavailable(f"openvino not installed ({e})") from None
        core = ov.Core()
        config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}
        if precision == "f32":
            config["INFERENCE_PRECISION_HINT"] = "f32"
        compiled = core.compile_model(core.read_model(_onnx_bytes(model, example)), "CPU", config)
        ran = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        if precision == "bf16" and ran != "bf16":
            raise PeerUnavailable(f"OpenVINO's default precision on this CPU is {ran}, not bf16 "
                                  "(peer_openvino runs f32)")
        request = compiled.create_infer_request()

        def predict(x):
            return request.infer({0: x})[compiled.output(0)].copy()

        how = "INFERENCE_PRECISION_HINT f32" if precision == "f32" else "its default precision (no hint)"
        return Peer(predict, f"openvino {ov.__version__.split('-')[0]} CPU, {how}: {ran}, LATENCY hint; "
                             f"{openvino_primitives(compiled)}")
    return make


def _cuda_torch(torch):
    torch.backends.cudnn.allow_tf32 = False  # strict fp32, as bench's gpu rows
    torch.backends.cuda.matmul.allow_tf32 = False


def _make_torch_cuda(benchmark: bool):
    def make(model, example, threads):
        import torch

        _cuda_torch(torch)
        torch.backends.cudnn.benchmark = benchmark
        gpu_model = model.to("cuda")

        def predict(x):
            with torch.inference_mode():
                return gpu_model(torch.from_numpy(x).to("cuda")).cpu().numpy()

        def timed(x):
            xd = torch.from_numpy(x).to("cuda")

            def run():
                with torch.inference_mode():
                    gpu_model(xd)
            return run

        how = "cudnn.benchmark on (autotuner)" if benchmark else "cudnn.benchmark off"
        return Peer(predict, f"torch {_torch_version(torch)} eager on the GPU, {how}, TF32 off, fp32", timed)
    return make


def make_torch_cuda_graph(model, example, threads):
    """The eager pass captured once per batch size into a CUDA graph (static
    input and output buffers), replayed: what removing per-layer launch
    overhead buys, as bench's gpu_cudnn_graph."""
    import torch

    _cuda_torch(torch)
    torch.backends.cudnn.benchmark = False
    gpu_model = model.to("cuda")
    graphs = {}

    def graph_for(batch):
        if batch not in graphs:
            static_x = torch.zeros((batch, *example.shape[1:]), device="cuda")
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

    return Peer(predict, f"torch {_torch_version(torch)} CUDA graph of the eager pass, replayed, TF32 off, fp32",
                timed)


# peer -> (gpu, precision, make)
PEERS = {
    "peer_torch": (False, "f32", make_torch),
    "peer_torchscript": (False, "f32", make_torchscript),
    "peer_torch_compile": (False, "f32", make_torch_compile),
    "peer_ort": (False, "f32", make_ort),
    "peer_openvino": (False, "f32", _make_openvino("f32")),
    "peer_openvino_bf16": (False, "bf16", _make_openvino("bf16")),
    "peer_torch_cuda": (True, "f32", _make_torch_cuda(False)),
    "peer_torch_cudnn_benchmark": (True, "f32", _make_torch_cuda(True)),
    "peer_torch_cuda_graph": (True, "f32", make_torch_cuda_graph),
    "peer_ort_cuda": (True, "f32", lambda m, e, t: make_ort(m, e, t, "CUDAExecutionProvider")),
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


def _validate(peer: Peer, precision: str, test_x, labels, ref_logits, ref_predictions):
    """(problem or None, counters) for a peer: its logits on the reference
    images, then its top-1 on the whole test set."""
    out = np.concatenate([peer.predict(test_x[i:i + 64]) for i in range(0, len(ref_logits), 64)])
    err = float(np.abs(out - ref_logits).max() / np.abs(ref_logits).max())
    predictions = np.concatenate([peer.predict(test_x[i:i + 100]).argmax(1) for i in range(0, len(test_x), 100)])
    accuracy = float((predictions == labels).mean())
    disagreements = int((predictions != ref_predictions).sum())
    allowed = MAX_DISAGREEMENTS if precision == "f32" else int(MAX_DISAGREEMENT_FRACTION * len(test_x))
    counters = {"accuracy": accuracy, "accuracy_drop": float((ref_predictions == labels).mean()) - accuracy,
                "max_rel_err": err, "torch_disagreements": float(disagreements)}
    if not err <= TOLERANCE[precision]:
        return f"max_rel_err {err:.3g} against PyTorch's reference logits (tolerance {TOLERANCE[precision]:g})", counters
    if disagreements > allowed:
        return f"top-1 differs from PyTorch's on {disagreements} test images (at most {allowed})", counters
    return None, counters


def networks(session: Session) -> None:
    wanted_all = [(net, p, b) for net in NETWORK_NAMES for p, (gpu, _, _) in PEERS.items()
                  for b in (GPU_BATCHES if gpu else CPU_BATCHES)
                  if session.selected(f"{net}/{p}/batch:{b}", gpu)]
    if not wanted_all:
        return
    try:
        import torch  # noqa: F401 (the peers below need it; checked here once)
        from safetensors import safe_open
        from safetensors.torch import load_file

        from dlbench.nets import NETWORKS, load_fashion, network_input
    except ImportError as e:
        session.skip("network peers", f"torch or safetensors not installed ({e})")
        return
    images, labels = load_fashion(DATA, "test")
    for network in NETWORK_NAMES:
        wanted = [(p, b) for net, p, b in wanted_all if net == network]
        if not wanted:
            continue
        weights = MODELS / f"{network}.safetensors"
        reference = load_file(str(MODELS / f"{network}.reference.safetensors"))
        ref_logits = reference["logits"].double().numpy()
        ref_predictions = reference["predictions"].numpy()
        if not np.array_equal(reference["labels"].numpy(), labels):
            raise SystemExit(f"peers: the reference of {network} was made on other test labels than {DATA}")
        with safe_open(str(weights), "pt") as f:
            meta = f.metadata()
        model = NETWORKS[network]()
        model.load_state_dict(load_file(str(weights)))
        model.eval()
        shape = model.input_shape
        test_x = network_input(images, shape, float(meta["input_mean"]), float(meta["input_std"])).numpy()
        flops = 2 * macs_per_image(model, shape)
        for peer_name in dict.fromkeys(p for p, _ in wanted):
            gpu, precision, make = PEERS[peer_name]
            fresh = NETWORKS[network]()  # each peer its own copy: .to('cuda') and compile change a module
            fresh.load_state_dict(model.state_dict())
            fresh.eval()
            peer = session.prepare(peer_name, make, fresh, test_x[:1], session.threads)
            if peer is None:
                continue
            problem, counters = _validate(peer, precision, test_x, labels, ref_logits, ref_predictions)
            for b in (b for p, b in wanted if p == peer_name):
                name = f"{network}/{peer_name}/batch:{b}"
                if problem:
                    session.fail(name, problem, gpu)
                    continue
                x = np.ascontiguousarray(test_x[np.arange(b) % len(test_x)])
                session.measure(name, Prepared(peer.timed(x), lambda: None, peer.label), gpu=gpu,
                                items_per_call=float(b), flops_per_call=flops * b, counters=counters,
                                latency=b == 1)
