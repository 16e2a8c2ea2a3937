"""reference/ is the oracle: it computes with its own loops and never with
the kernels it checks (docs/architecture.md, "The layers"). It may include
from kernels/ only the descriptions below, and it never calls the one
computation of the network's input those headers declare beside them."""

import re
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The kernels/ headers the reference may include, and why: descriptions of
# the problem, with no computation of a result.
ALLOWED = {
    "kernels/common/error.h": "dlb::Error and DLB_REQUIRE, the project's one error type",
    "kernels/conv/conv.h": "ConvArgs, the convolution problem's argument struct",
    "kernels/nn/model/network.h": "the network description",
    "kernels/nn/data/dataset.h": "the data sets the networks read",
    "kernels/nn/train/train_params.h": "the trainable tensors, their order and names, and SGD's settings",
    "kernels/nn/data/augment.h": "a training batch's input format and each image's augmentation draw",
}
# Computations the allowed headers declare beside their descriptions.
FORBIDDEN_CALLS = ("network_input",)

INCLUDE = re.compile(r'^\s*#\s*include\s+"(kernels/[^"]+)"', re.M)


def violations(root: Path) -> list[str]:
    """One line per kernels/ header a file under root/reference includes
    outside ALLOWED, and per call of a FORBIDDEN_CALLS function."""
    found = []
    for path in sorted((root / "reference").rglob("*")):
        if path.suffix not in (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh"):
            continue
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(root)
        for header in INCLUDE.findall(text):
            if header not in ALLOWED:
                found.append(f"{rel}: includes {header}")
        code = re.sub(r"//[^\n]*", "", text)
        for name in FORBIDDEN_CALLS:
            if re.search(rf"\b{name}\s*\(", code):
                found.append(f"{rel}: calls {name}")
    return found


class ReferenceUsesNoKernel(unittest.TestCase):
    def test_reference_includes_only_descriptions_from_kernels(self):
        self.assertEqual(violations(ROOT), [])

    def test_every_allowed_header_exists(self):
        for header in ALLOWED:
            self.assertTrue((ROOT / header).is_file(), header)

    def test_the_check_sees_a_kernel_include_and_a_forbidden_call(self):
        with tempfile.TemporaryDirectory() as d:
            ref = Path(d) / "reference"
            ref.mkdir()
            (ref / "ok.cpp").write_text('#include "kernels/nn/model/network.h"\n// network_input(...) in a comment\n')
            (ref / "bad.h").write_text('#pragma once\n#include "kernels/nn/data/loader.h"\n')
            (ref / "bad.cpp").write_text('#include "kernels/nn/data/dataset.h"\nvoid f() { nn::network_input(d, 0); }\n')
            self.assertEqual(violations(Path(d)),
                             ["reference/bad.cpp: calls network_input", "reference/bad.h: includes kernels/nn/data/loader.h"])


if __name__ == "__main__":
    sys.exit(unittest.main())
