"""The problem descriptors scripts/peers takes, in bench's syntax (issue 42):
fields separated by '/', each `name:value`, the values integers:

    --softmax=rows:R/cols:C          softmax/<peer>/rows:R/cols:C and log_softmax/...
    --gemm=m:M/n:N/k:K               gemm/<peer>/m:M/n:N/k:K, every precision
    --net=NET/batch:B                NET/<peer>/batch:B: resnet20, mnist_cnn or
                                     mnist_lenet (inference), or their _train
                                     (the training step: NET_train/<peer>/batch:B)

Each registers the peers of its family at that shape under the family's
usual case names. Repeating a flag adds shapes; with any descriptor given,
only the problems given run (as benchdnn runs the problem it is given), and
--benchmark_filter still selects among their cases. A bad descriptor is a
DescriptorError naming the flag and the field (scripts/peers: exit 2).

NumPy-free: scripts/peers parses its command line before any peer module
needs a framework."""

from __future__ import annotations

from dataclasses import dataclass, field

NETWORKS = ("resnet20", "mnist_cnn", "mnist_lenet")

# The most elements of one array: 2^28 (1 GiB of fp32; the float64
# reference of a softmax or a GEMM's C is 2 GiB), four times bench's largest
# softmax (2^26) and the 4096^3 GEMM's matrices sixteen times over.
MAX_ELEMENTS = 1 << 28
# (field, lowest, highest) per family, the fields in the order of the case
# name: a softmax of at most MAX_ELEMENTS, GEMM sides up to 65,536 with each
# matrix at most MAX_ELEMENTS, a batch up to 65,536 images (the networks'
# peers validate on the 10,000 test images in batches of that size).
LIMITS = {
    "softmax": (("rows", 1, MAX_ELEMENTS), ("cols", 1, MAX_ELEMENTS)),
    "gemm": (("m", 1, 65536), ("n", 1, 65536), ("k", 1, 65536)),
    "net": (("batch", 1, 65536),),
}


class DescriptorError(ValueError):
    """A descriptor that cannot be run; the message names the flag and the field."""


@dataclass
class Problems:
    """The shapes the descriptors gave, per family; `given` False: none was
    given, every family runs its default shapes."""

    softmax: list[tuple[int, int]] = field(default_factory=list)
    gemm: list[tuple[int, int, int]] = field(default_factory=list)
    networks: dict[str, list[int]] = field(default_factory=dict)  # inference: network -> batches
    training: dict[str, list[int]] = field(default_factory=dict)  # the step: network -> batches

    @property
    def given(self) -> bool:
        return bool(self.softmax or self.gemm or self.networks or self.training)


def _fields(flag: str, text: str, names: tuple[str, ...], body: str | None = None) -> dict[str, str]:
    """The name:value fields of `body` (the whole descriptor `text` by
    default), each of `names` exactly once."""
    values: dict[str, str] = {}
    for part in (text if body is None else body).split("/"):
        name, colon, value = part.partition(":")
        if not colon or not name or not value:
            raise DescriptorError(f"--{flag}={text}: '{part}' is not a name:value field "
                                  f"(expected {'/'.join(f'{n}:N' for n in names)})")
        if name not in names:
            raise DescriptorError(f"--{flag}={text}: unknown field '{name}' (fields: {', '.join(names)})")
        if name in values:
            raise DescriptorError(f"--{flag}={text}: field '{name}' given twice")
        values[name] = value
    missing = [n for n in names if n not in values]
    if missing:
        raise DescriptorError(f"--{flag}={text}: missing field{'s' if len(missing) > 1 else ''} "
                              + ", ".join(f"'{n}'" for n in missing))
    return values


def _integers(flag: str, text: str, family: str, values: dict[str, str]) -> tuple[int, ...]:
    out = []
    for name, lowest, highest in LIMITS[family]:
        raw = values[name]
        if not (raw.isascii() and raw.isdigit()):  # no sign, space, fraction or '_': int() takes those
            raise DescriptorError(f"--{flag}={text}: field '{name}': '{raw}' is not a positive integer")
        value = int(raw)
        if not lowest <= value <= highest:
            raise DescriptorError(f"--{flag}={text}: field '{name}' must be between {lowest:,} and {highest:,} "
                                  f"(got {value:,})")
        out.append(value)
    return tuple(out)


def parse_softmax(text: str) -> tuple[int, int]:
    rows, cols = _integers("softmax", text, "softmax", _fields("softmax", text, ("rows", "cols")))
    if rows * cols > MAX_ELEMENTS:
        raise DescriptorError(f"--softmax={text}: rows x cols is {rows * cols:,} elements, "
                              f"more than {MAX_ELEMENTS:,}")
    return rows, cols


def parse_gemm(text: str) -> tuple[int, int, int]:
    m, n, k = _integers("gemm", text, "gemm", _fields("gemm", text, ("m", "n", "k")))
    for what, size in (("m x k (A)", m * k), ("k x n (B)", k * n), ("m x n (C)", m * n)):
        if size > MAX_ELEMENTS:
            raise DescriptorError(f"--gemm={text}: {what} is {size:,} elements, more than {MAX_ELEMENTS:,}")
    return m, n, k


def parse_net(text: str) -> tuple[str, bool, int]:
    """(network, training step or not, batch)."""
    network, slash, rest = text.partition("/")
    known = ", ".join(NETWORKS) + " (inference) or " + ", ".join(f"{n}_train" for n in NETWORKS)
    train = network.endswith("_train")
    base = network.removesuffix("_train")
    if base not in NETWORKS:
        raise DescriptorError(f"--net={text}: unknown network '{network}' (known: {known})")
    if not slash:
        raise DescriptorError(f"--net={text}: missing field 'batch' (e.g. --net={network}/batch:64)")
    (batch,) = _integers("net", text, "net", _fields("net", text, ("batch",), rest))
    return base, train, batch


def _add(items: list, item) -> None:
    if item not in items:
        items.append(item)


def problems(softmax: list[str] | None = None, gemm: list[str] | None = None,
             net: list[str] | None = None) -> Problems:
    """The descriptors of each flag (in the order given) as one Problems; the
    first bad one raises DescriptorError."""
    out = Problems()
    for text in softmax or ():
        _add(out.softmax, parse_softmax(text))
    for text in gemm or ():
        _add(out.gemm, parse_gemm(text))
    for text in net or ():
        network, train, batch = parse_net(text)
        _add((out.training if train else out.networks).setdefault(network, []), batch)
    return out
