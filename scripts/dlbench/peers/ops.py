"""Operator peers: the same shapes, the same seeded inputs (dlbench.seeded,
bit for bit bench's), the same counters and names as bench's operator
families, each output checked against a float64 NumPy reference before it
is timed, with bench's tolerance and comparison (harness.compare).

    daxpy/<peer>/n:<n>, n = 2^10 .. 2^26, fp64, a = 1/3, 24 bytes per element
      peer_numpy              y += a * x (NumPy makes a temporary for a * x)
      peer_torch              y.add_(x, alpha=a): one fused pass
      peer_torch_cuda         the same on the GPU
    softmax/<peer>/rows:<r>/cols:<c> (and log_softmax/), bench's 11 shapes,
    bench's `mixed` input (four special rows), 2 * rows * cols * 4 bytes
      peer_numpy              exp(x - max) / sum, row-wise NumPy (log: z - log(sum))
      peer_torch_naive        the PyTorch tutorial's naive_softmax (max, subtract,
                              exp, sum, divide: five kernels, four temporaries)
      peer_torch_script       torch.jit.script(naive_softmax), as the tutorial fuses it
      peer_torch              torch.softmax(x, 1, out=y) (log: torch.log_softmax)
      peer_torch_compile      torch.compile of torch.softmax (inductor, default mode,
                              dynamic=False: a kernel for the shape)
      peer_torch_cuda[_naive|_script|_compile]   the same on the GPU
    conv/<peer>/n:../c:../h:../w:../k:../r:../s:../stride:../pad:.., bench's
    default shapes (ResNet20 and MNIST layers at batch 1 and 64), no bias
      peer_torch              F.conv2d, NCHW fp32
      peer_torch_channels_last  F.conv2d on channels_last tensors (NHWC in memory)
      peer_torch_cuda         F.conv2d on the GPU, cudnn.benchmark off (cuDNN's heuristic)
      peer_torch_cudnn_benchmark  the same with the autotuner (torch.backends.cudnn.benchmark)
    gemm/<peer>/m:../n:../k:.., bench's shapes, C = A B, fp32 A and B
      peer_numpy_f32          np.matmul(A, B, out=C) (NumPy's bundled BLAS)
      peer_torch_f32          torch.matmul(A, B, out=C)
      peer_torch_bf16         torch.matmul on A and B rounded to bf16; C in bf16
                              (PyTorch's result type), checked with the bf16 bound
      peer_torch_cuda_f32 / _tf32 / _bf16   the same on the GPU (TF32 off / on)
    copy/<peer>/bytes:<n>, 4 KiB .. 1 GiB in powers of 4, GPU only
      peer_torch_pinned       x.to('cuda', non_blocking=True) from pinned memory
      peer_torch_pageable     x.to('cuda') from pageable memory

Tolerances are bench's: daxpy 2^-52 (the peers round a * x and the sum
separately or fuse them, as Eigen's row may; the reference is computed in
long double), softmax 1e-5 per row with every row summing to 1, conv and
fp32 gemm 1e-5, bf16 gemm 1e-2 (docs/architecture.md's bf16 bound: a bf16 C alone is
2^-9 off), tf32 1e-3, and copies exact."""

from __future__ import annotations

import numpy as np

from dlbench import seeded
from dlbench.names import precision_of
from dlbench.peers.harness import PeerUnavailable, Prepared, Session, l2_flusher

# ---- frameworks -------------------------------------------------------------------------------------------


def torch_module():
    try:
        import torch
    except ImportError as e:
        raise PeerUnavailable(f"torch not installed ({e})") from None
    return torch


def _sync(torch, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _torch_label(torch, what: str, device: str, threads: int) -> str:
    where = "GPU" if device == "cuda" else f"{threads} threads"
    return f"torch {torch.__version__.split('+')[0]} {what}, {where}"


# ---- daxpy ------------------------------------------------------------------------------------------------

DAXPY_ALPHA = 1.0 / 3.0  # bench/cases/daxpy_case.cpp kAlpha, kSeedX, kSeedY
DAXPY_SEEDS = (11, 12)
DAXPY_TOLERANCE = 2.0**-52  # kernels/daxpy/daxpy.cpp kEigenTolerance


def _daxpy_numpy(x, y0, session):
    y = y0.copy()

    def run():
        y.__iadd__(DAXPY_ALPHA * x)

    return Prepared(run, lambda: y, f"numpy {np.__version__} y += a * x, one thread")


def _daxpy_torch(device):
    def make(x, y0, session):
        torch = torch_module()
        xt, yt = torch.from_numpy(x).to(device), torch.from_numpy(y0.copy()).to(device)

        def result():
            _sync(torch, device)
            return yt.cpu().numpy()

        return Prepared(lambda: yt.add_(xt, alpha=DAXPY_ALPHA), result,
                        _torch_label(torch, "y.add_(x, alpha=a)", device, session.threads))
    return make


DAXPY_PEERS = {"peer_numpy": (False, _daxpy_numpy), "peer_torch": (False, _daxpy_torch("cpu")),
               "peer_torch_cuda": (True, _daxpy_torch("cuda"))}


def daxpy(session: Session) -> None:
    if session.problems.given:  # no daxpy descriptor: a descriptor given runs its problem alone
        return
    for log2n in range(10, 27):
        n = 1 << log2n
        wanted = {p: spec for p, spec in DAXPY_PEERS.items() if session.selected(f"daxpy/{p}/n:{n}", spec[0])}
        if not wanted:
            continue
        x = seeded.fill_random(n, DAXPY_SEEDS[0], np.float64)
        y0 = seeded.fill_random(n, DAXPY_SEEDS[1], np.float64)
        expected = (np.longdouble(DAXPY_ALPHA) * x.astype(np.longdouble) + y0).astype(np.float64)
        for peer, (gpu, make) in wanted.items():
            name = f"daxpy/{peer}/n:{n}"
            prepared = session.prepare(peer, make, x, y0, session)
            if prepared is None:
                continue
            checked = session.check(name, prepared, expected, DAXPY_TOLERANCE, gpu=gpu)
            if checked:
                session.measure(name, prepared, gpu=gpu, bytes_per_call=24.0 * n,
                                counters={"max_rel_err": checked.max_rel_err},
                                flush=l2_flusher() if gpu else None)


# ---- softmax ----------------------------------------------------------------------------------------------

SOFTMAX_DRAM, SOFTMAX_CACHE = 1 << 26, 1 << 17  # bench/softmax.cpp
SOFTMAX_COLS = (10, 128, 1024, 4096, 32768)
SOFTMAX_LONG_ROW = 1000000
SOFTMAX_SEEDS = (51, 52)  # bench/cases/softmax_case.cpp kSeedX, kSeedSign
SOFTMAX_TOLERANCE = 1e-5


def softmax_shapes() -> list[tuple[int, int]]:
    shapes = [(elements // cols, cols) for elements in (SOFTMAX_DRAM, SOFTMAX_CACHE) for cols in SOFTMAX_COLS]
    return shapes + [(1, SOFTMAX_LONG_ROW)]


def softmax_input(rows: int, cols: int) -> np.ndarray:
    """bench's `mixed` input: seeded random rows and, with 16 rows or more,
    rows 0-3 planted as large magnitude (+-1e4), masked (every third entry
    -inf from the second), all masked but the middle one, all equal."""
    x = seeded.fill_random(rows * cols, SOFTMAX_SEEDS[0]).reshape(rows, cols)
    if rows >= 16:
        index = np.arange(cols, dtype=np.uint64)
        sign = np.where(seeded.unit_random(SOFTMAX_SEEDS[1], index) < 0.5, -1.0, 1.0)
        x[0] = (sign * 1e4 + 4.0 * x[0].astype(np.float64)).astype(np.float32)
        x[1, 1::3] = -np.inf
        keep = x[2, cols // 2]
        x[2] = -np.inf
        x[2, cols // 2] = keep
        x[3] = x[3, 0]
    return x


def softmax_reference(x: np.ndarray, log: bool) -> np.ndarray:
    """reference/softmax.cpp in NumPy: float64, row max, exp(x - max), sum, divide (log: (x - max) - log sum)."""
    out = np.empty(x.shape, dtype=np.float64)
    step = max(1, (1 << 22) // x.shape[1])
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for begin in range(0, x.shape[0], step):
            z = x[begin:begin + step].astype(np.float64)
            z -= z.max(axis=1, keepdims=True)
            e = np.exp(z)
            s = e.sum(axis=1, keepdims=True)
            out[begin:begin + step] = z - np.log(s) if log else e / s
    return out


def _rows_sum_to_one(log: bool, expected: np.ndarray):
    """bench's second check: every row whose reference is a number sums to 1 (log: its exp)."""
    def check(out):
        numbered = ~np.isnan(expected[:, 0])
        y = out.reshape(expected.shape)[numbered].astype(np.float64)
        sums = (np.exp(y) if log else y).sum(axis=1)
        off = np.flatnonzero(~(np.abs(sums - 1.0) <= SOFTMAX_TOLERANCE))
        if off.size:
            return f"{off.size} rows do not sum to 1 (row {np.flatnonzero(numbered)[off[0]]} sums to {sums[off[0]]:.9g})"
        return None
    return check


def naive_softmax_of(torch):
    """The PyTorch tutorial's naive softmax (also Triton's fused-softmax
    tutorial's), word for word; made inside a function so that this module
    imports torch only when a torch peer runs."""
    def naive_softmax(x):
        x_max = x.max(dim=1)[0]
        z = x - x_max[:, None]
        numerator = torch.exp(z)
        denominator = numerator.sum(dim=1)
        ret = numerator / denominator[:, None]
        return ret
    return naive_softmax


def _softmax_numpy(x, log, session):
    out = {}

    def run():
        z = x - x.max(axis=1, keepdims=True)
        e = np.exp(z)
        out["y"] = z - np.log(e.sum(axis=1, keepdims=True)) if log else e / e.sum(axis=1, keepdims=True)

    what = "z - log(sum(exp(z)))" if log else "exp(z) / sum(exp(z))"
    return Prepared(run, lambda: out["y"], f"numpy {np.__version__} {what}, z = x - max, row-wise, one thread")


def _softmax_torch(kind: str, device: str):
    def make(x, log, session):
        torch = torch_module()
        xt = torch.from_numpy(x).to(device)
        holder = {}
        if kind == "naive":
            fn, what = naive_softmax_of(torch), "the tutorial's naive_softmax (eager)"
        elif kind == "script":
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # jit.script's deprecation note
                fn = torch.jit.script(naive_softmax_of(torch))
            what = "torch.jit.script(naive_softmax)"
        elif kind == "compile":
            op = torch.log_softmax if log else torch.softmax
            torch._dynamo.reset()  # a fresh compile per shape, not a recompile (limited) of the last one
            fn = torch.compile(lambda t: op(t, 1), dynamic=False)
            what = f"torch.compile({op.__name__}, dynamic=False) (inductor, default mode)"
        else:
            op = torch.log_softmax if log else torch.softmax
            y = torch.empty_like(xt)
            fn, what = (lambda t: op(t, 1, out=y)), f"torch.{op.__name__}(x, 1, out=y)"

        def run():
            holder["y"] = fn(xt)

        def result():
            _sync(torch, device)
            return holder["y"].cpu().numpy()

        return Prepared(run, result, _torch_label(torch, what, device, session.threads))
    return make


# peer -> (gpu, make, ops it has)
BOTH, SOFTMAX_ONLY = ("softmax", "log_softmax"), ("softmax",)
SOFTMAX_PEERS = {
    "peer_numpy": (False, _softmax_numpy, BOTH),
    "peer_torch_naive": (False, _softmax_torch("naive", "cpu"), SOFTMAX_ONLY),
    "peer_torch_script": (False, _softmax_torch("script", "cpu"), SOFTMAX_ONLY),
    "peer_torch": (False, _softmax_torch("eager", "cpu"), BOTH),
    "peer_torch_compile": (False, _softmax_torch("compile", "cpu"), BOTH),
    "peer_torch_cuda_naive": (True, _softmax_torch("naive", "cuda"), SOFTMAX_ONLY),
    "peer_torch_cuda_script": (True, _softmax_torch("script", "cuda"), SOFTMAX_ONLY),
    "peer_torch_cuda": (True, _softmax_torch("eager", "cuda"), BOTH),
    "peer_torch_cuda_compile": (True, _softmax_torch("compile", "cuda"), BOTH),
}


def softmax(session: Session) -> None:
    shapes = session.problems.softmax if session.problems.given else softmax_shapes()
    for op in ("softmax", "log_softmax"):
        log = op == "log_softmax"
        for rows, cols in shapes:
            wanted = {p: spec for p, spec in SOFTMAX_PEERS.items()
                      if op in spec[2] and session.selected(f"{op}/{p}/rows:{rows}/cols:{cols}", spec[0])}
            if not wanted:
                continue
            x = softmax_input(rows, cols)
            expected = softmax_reference(x, log)
            for peer, (gpu, make, _) in wanted.items():
                name = f"{op}/{peer}/rows:{rows}/cols:{cols}"
                prepared = session.prepare(peer, make, x, log, session)
                if prepared is None:
                    continue
                checked = session.check(name, prepared, expected, SOFTMAX_TOLERANCE, block=cols, gpu=gpu,
                                        extra=_rows_sum_to_one(log, expected))
                if checked:
                    session.measure(name, prepared, gpu=gpu, bytes_per_call=2.0 * rows * cols * 4,
                                    counters={"max_rel_err": checked.max_rel_err},
                                    flush=l2_flusher() if gpu else None)
            del x, expected


# ---- conv -------------------------------------------------------------------------------------------------

CONV_SEEDS = (51, 52)  # bench/cases/conv_case.cpp kSeedX, kSeedW
CONV_TOLERANCE = 1e-5
# bench/cases/conv_case.cpp conv_default_shapes(): (origin, c, h, w, k, r, s, stride, pad) at batch 1 and 64
CONV_LAYERS = (
    ("resnet20 conv1 3->16 32x32", 3, 32, 32, 16, 3, 3, 1, 1),
    ("resnet20 stage1 16->16 32x32", 16, 32, 32, 16, 3, 3, 1, 1),
    ("resnet20 stage2 16->32 s2", 16, 32, 32, 32, 3, 3, 2, 1),
    ("resnet20 stage2 32->32 16x16", 32, 16, 16, 32, 3, 3, 1, 1),
    ("resnet20 stage3 32->64 s2", 32, 16, 16, 64, 3, 3, 2, 1),
    ("resnet20 stage3 64->64 8x8", 64, 8, 8, 64, 3, 3, 1, 1),
    ("mnist conv1 1->32 28x28", 1, 28, 28, 32, 3, 3, 1, 0),
    ("mnist conv2 32->64 26x26", 32, 26, 26, 64, 3, 3, 1, 0),
)


def conv_shapes() -> list[tuple[str, dict]]:
    keys = ("c", "h", "w", "k", "r", "s", "stride", "pad")
    return [(origin, {"n": n, **dict(zip(keys, rest))}) for n in (1, 64) for origin, *rest in CONV_LAYERS]


def conv_reference(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """reference/conv.cpp in NumPy: float64, NCHW x, KCRS w, zero padding, no bias."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k, c, r, s = w.shape
    windows = np.lib.stride_tricks.sliding_window_view(x, (r, s), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("nchwrs,kcrs->nkhw", windows, w.astype(np.float64), optimize=True)


def _conv_torch(device: str, channels_last: bool = False, benchmark: bool = False):
    def make(x, w, shape, session):
        torch = torch_module()
        import torch.nn.functional as F

        if device == "cuda":
            torch.backends.cudnn.benchmark = benchmark
            torch.backends.cudnn.allow_tf32 = False  # strict fp32, as bench's cuDNN rows
        xt, wt = torch.from_numpy(x).to(device), torch.from_numpy(w).to(device)
        if channels_last:
            xt, wt = xt.to(memory_format=torch.channels_last), wt.to(memory_format=torch.channels_last)
        holder = {}

        def run():
            with torch.inference_mode():
                holder["y"] = F.conv2d(xt, wt, stride=shape["stride"], padding=shape["pad"])

        def result():
            _sync(torch, device)
            return holder["y"].contiguous().cpu().numpy()

        what = "F.conv2d, " + ("channels_last (NHWC in memory)" if channels_last else "NCHW") + " fp32"
        if device == "cuda":
            what += ", cudnn.benchmark " + ("on (autotuner)" if benchmark else "off") + ", TF32 off"
        return Prepared(run, result, _torch_label(torch, what, device, session.threads))
    return make


CONV_PEERS = {
    "peer_torch": (False, _conv_torch("cpu")),
    "peer_torch_channels_last": (False, _conv_torch("cpu", channels_last=True)),
    "peer_torch_cuda": (True, _conv_torch("cuda")),
    "peer_torch_cudnn_benchmark": (True, _conv_torch("cuda", benchmark=True)),
}


def conv(session: Session) -> None:
    if session.problems.given:  # bench's --conv= is not taken here (yet): a descriptor runs its problem alone
        return
    for origin, shape in conv_shapes():
        args = "/".join(f"{k}:{v}" for k, v in shape.items())
        wanted = {p: spec for p, spec in CONV_PEERS.items() if session.selected(f"conv/{p}/{args}", spec[0])}
        if not wanted:
            continue
        n, c, h, w_, k, r, s = (shape[a] for a in ("n", "c", "h", "w", "k", "r", "s"))
        x = seeded.fill_random(n * c * h * w_, CONV_SEEDS[0]).reshape(n, c, h, w_)
        w = seeded.fill_random(k * c * r * s, CONV_SEEDS[1]).reshape(k, c, r, s)
        expected = conv_reference(x, w, shape["stride"], shape["pad"])
        flops = 2.0 * expected.size * c * r * s
        for peer, (gpu, make) in wanted.items():
            name = f"conv/{peer}/{args}"
            prepared = session.prepare(peer, make, x, w, shape, session)
            if prepared is None:
                continue
            prepared.label = f"{origin}; {prepared.label}"  # bench's conv labels start with the origin
            checked = session.check(name, prepared, expected, CONV_TOLERANCE, gpu=gpu)
            if checked:
                session.measure(name, prepared, gpu=gpu, flops_per_call=flops,
                                counters={"max_rel_err": checked.max_rel_err},
                                describes=prepared.label.split("; ", 1)[1])


# ---- gemm -------------------------------------------------------------------------------------------------

GEMM_SEEDS = (61, 62)  # bench/cases/gemm_case.cpp kSeedA, kSeedB
GEMM_SHAPES = (  # bench/gemm.cpp kShapes
    (128, 128, 128), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096),
    (1, 128, 9216), (64, 128, 9216), (1, 10, 64), (64, 10, 64),
    (700, 5124, 2048), (700, 35, 2048), (1, 7680, 2560), (1500, 3072, 1024),
)
GEMM_TOLERANCE = {"fp32": 1e-5, "tf32": 1e-3, "bf16": 1e-2}  # by names.precision_of


def round_bf16(a: np.ndarray) -> np.ndarray:
    """fp32 -> the nearest bf16 (ties to even), as fp32: kernels/gemm/quant.h's rounding."""
    bits = a.astype(np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return rounded.view(np.float32)


def _gemm_numpy(a, b, precision, session):
    c = np.empty((a.shape[0], b.shape[1]), dtype=np.float32)
    return Prepared(lambda: np.matmul(a, b, out=c), lambda: c,
                    f"numpy {np.__version__} matmul(A, B, out=C), its bundled BLAS")


def _gemm_torch(device: str):
    def make(a, b, precision, session):
        torch = torch_module()
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        if device == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        at = torch.from_numpy(a).to(device=device, dtype=dtype)
        bt = torch.from_numpy(b).to(device=device, dtype=dtype)
        c = torch.empty((a.shape[0], b.shape[1]), dtype=dtype, device=device)

        def result():
            _sync(torch, device)
            return c.float().cpu().numpy()

        what = {"fp32": "fp32", "tf32": "fp32 in and out, TF32 on", "bf16": "bf16 A and B, bf16 C"}[precision]
        return Prepared(lambda: torch.matmul(at, bt, out=c), result,
                        _torch_label(torch, f"torch.matmul(A, B, out=C), {what}", device, session.threads))
    return make


GEMM_PEERS = {
    "peer_numpy_f32": (False, _gemm_numpy),
    "peer_torch_f32": (False, _gemm_torch("cpu")),
    "peer_torch_bf16": (False, _gemm_torch("cpu")),
    "peer_torch_cuda_f32": (True, _gemm_torch("cuda")),
    "peer_torch_cuda_tf32": (True, _gemm_torch("cuda")),
    "peer_torch_cuda_bf16": (True, _gemm_torch("cuda")),
}


def gemm(session: Session) -> None:
    for m, n, k in (session.problems.gemm if session.problems.given else GEMM_SHAPES):
        wanted = {p: spec for p, spec in GEMM_PEERS.items()
                  if session.selected(f"gemm/{p}/m:{m}/n:{n}/k:{k}", spec[0])}
        if not wanted:
            continue
        a = seeded.fill_random(m * k, GEMM_SEEDS[0]).reshape(m, k)
        b = seeded.fill_random(k * n, GEMM_SEEDS[1]).reshape(k, n)
        fp32 = a.astype(np.float64) @ b.astype(np.float64)
        bf16 = None
        for peer, (gpu, make) in wanted.items():
            name = f"gemm/{peer}/m:{m}/n:{n}/k:{k}"
            precision = precision_of(peer)
            expected = fp32
            if precision == "bf16":
                if bf16 is None:
                    bf16 = round_bf16(a).astype(np.float64) @ round_bf16(b).astype(np.float64)
                expected = bf16
            prepared = session.prepare(peer, make, a, b, precision, session)
            if prepared is None:
                continue
            checked = session.check(name, prepared, expected, GEMM_TOLERANCE[precision], gpu=gpu)
            if checked:
                counters = {"max_rel_err": checked.max_rel_err}
                if precision != "fp32":
                    counters["err_vs_f32"] = compare_err(prepared.result(), fp32)
                session.measure(name, prepared, gpu=gpu, flops_per_call=2.0 * m * n * k, counters=counters)


def compare_err(out: np.ndarray, ref: np.ndarray) -> float:
    """max |out - ref| / max |ref|: bench's err_vs_f32."""
    return float(np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max())


# ---- copy (GPU) -------------------------------------------------------------------------------------------

COPY_SIZES = tuple(4096 * 4**i for i in range(10))  # 4 KiB .. 1 GiB, bench/copy.cpp


def _copy_torch(pinned: bool):
    def make(nbytes, session):
        torch = torch_module()
        host = torch.from_numpy(seeded.fill_random(nbytes // 4, 91).view(np.uint8))
        if pinned:
            host = host.pin_memory()
        holder = {}

        def run():
            holder["d"] = host.to("cuda", non_blocking=pinned)

        def result():
            torch.cuda.synchronize()
            return holder["d"].cpu().numpy()

        what = ("x.to('cuda', non_blocking=True) from pinned memory" if pinned
                else "x.to('cuda') from pageable memory")
        return Prepared(run, result, _torch_label(torch, what, "cuda", session.threads)), host.numpy()
    return make


COPY_PEERS = {"peer_torch_pinned": _copy_torch(True), "peer_torch_pageable": _copy_torch(False)}


def copy(session: Session) -> None:
    if session.problems.given:
        return
    for nbytes in COPY_SIZES:
        for peer, make in COPY_PEERS.items():
            name = f"copy/{peer}/bytes:{nbytes}"
            if not session.selected(name, gpu=True):
                continue
            made = session.prepare(peer, make, nbytes, session)
            if made is None:
                continue
            prepared, source = made
            if session.check(name, prepared, source, 0.0, gpu=True):
                session.measure(name, prepared, gpu=True, bytes_per_call=float(nbytes),
                                counters={"max_rel_err": 0.0})


FAMILIES = (daxpy, softmax, conv, gemm, copy)
