"""The instruction set a reduced-precision case's arithmetic ran on, and the
peak multiply-accumulate rate that instruction set has over fp32 FMA: the
ratio a measured int8/fp32 or bf16/fp32 speedup is to be read against
("3.9x" on a VNNI machine is 3.9x of a possible 4x; with AMX, of 32x).

Peak MACs per cycle per core, from the instructions' widths and issue rates:
  fp32 AVX-512 FMA       2 x 16 = 32
  int8 AVX-512 VNNI      2 x 64 = 128   (4x)   vpdpbusd: 16 lanes x 4 bytes
  int8 AMX               1024           (32x)  tdpbusd: 16x16x64 per 16 cycles
  bf16 AVX-512 BF16      2 x 32 = 64    (2x)   vdpbf16ps: 16 lanes x 2
  bf16 AMX               512            (16x)  tdpbf16ps: 16x16x32 per 16 cycles
A whole network can beat the ratio of peaks when its fp32 run is far from
peak (memory traffic shrinks 4x in int8), or fall short of it (layers too
small to keep the units busy, fp32 layers left in the chain)."""

from __future__ import annotations

from dlbench.names import precision_of
from dlbench.results import Case

# (ISA, peak MACs/cycle over fp32 FMA) by what the row's label or name says.
ISA_PEAKS = {
    "amx_int8": ("AMX int8", 32.0),
    "vnni": ("AVX-512 VNNI", 4.0),
    "amx_bf16": ("AMX bf16", 16.0),
    "avx512_bf16": ("AVX-512 BF16", 2.0),
}


def isa_of(case: Case, context: dict) -> tuple[str, float | None]:
    """The instruction set the row's arithmetic ran on, and its peak MAC rate over fp32 FMA (None: not int8/bf16 arithmetic)."""
    label = str(case.runs[0].get("label", "")).lower() if case.runs else ""
    extensions = str(context.get("cpu_extensions", ""))
    precision = precision_of(case.variant)
    if "fakequant" in case.variant:
        return "fp32 (int8 simulated)", None
    if case.runs_on == "gpu":
        # The GPU's own units; their peak over fp32 depends on the GPU model
        # (not tabulated here): no peak.
        if precision == "int8":
            if "cublaslt" in case.variant:
                return "GPU int8 tensor cores (IMMA)", None
            if "_mma_" in case.variant:
                return "GPU int8 tensor cores (mma.sync)", None
            return "GPU dp4a", None
        if precision in ("fp16", "bf16", "tf32"):
            return f"GPU {precision} tensor cores", None
        return precision, None
    if precision == "int8":
        if "amx" in label:
            return ISA_PEAKS["amx_int8"]
        if "vnni" in label or case.variant.startswith(("cpu_own", "cpu_vnni")):  # own int8 kernels: VNNI only
            return ISA_PEAKS["vnni"]
        return "int8 without VNNI", None
    if precision == "bf16":
        if "amx" in label:
            return ISA_PEAKS["amx_bf16"]
        if "bf16" in label and "avx512_bf16" in extensions:
            return ISA_PEAKS["avx512_bf16"]
        return "bf16 emulated in fp32", 1.0
    return precision, None


def isa_note(case: Case, context: dict) -> str | None:
    """'AVX-512 VNNI, peak 4x fp32' for a reduced-precision case, else None."""
    isa, peak = isa_of(case, context)
    return f"{isa}, peak {peak:g}x fp32" if peak else None
