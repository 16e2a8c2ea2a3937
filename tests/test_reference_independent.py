"""reference/ is the oracle: it computes with its own loops and never with
the kernels it checks (docs/architecture.md, "The layers"). It may include
from kernels/ only the descriptions below, and it never calls the one
computation of the network's input those headers declare beside them.

What holds it to that at link time: dlb_reference links dlb_description
(the descriptions' definitions) and dlb_common, never dlb_kernels, and every
function the built reference calls is defined in the reference itself, in
dlb_description or in kernels/common/error.cpp (dlb_common's one part the
reference may use). ctest passes the built archives and the link lists
(tests/CMakeLists.txt); run alone, the link checks read them from the same
variables and fail without them."""

import os
import re
import subprocess
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

# What the libraries may link: the reference the descriptions and dlb_common,
# the descriptions dlb_common alone (so nothing reaches dlb_kernels).
LINKS = {
    "dlb_reference": {"dlb_common", "dlb_description"},
    "dlb_description": {"dlb_common"},
}
# dlb_common's members whose definitions the reference may call (error.h's).
COMMON_ALLOWED = ("error.cpp.o",)

INCLUDE = re.compile(r'^\s*#\s*include\s+"(kernels/[^"]+)"', re.M)
NM_LINE = re.compile(r"^(?:[0-9a-fA-F]+)?\s+([A-Za-z])\s+(.+)$")


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


def link_violations(links: dict[str, list[str]]) -> list[str]:
    """One line per library a LINKS target links beyond what LINKS allows."""
    found = []
    for target, allowed in LINKS.items():
        for lib in links.get(target, []):
            if lib not in allowed:
                found.append(f"{target} links {lib}")
    return found


def symbols(nm_text: str) -> dict[str, tuple[set[str], set[str]]]:
    """Archive member -> (symbols it defines, symbols it leaves undefined),
    from `nm -C` of an archive (members as 'name.o:' lines)."""
    members: dict[str, tuple[set[str], set[str]]] = {}
    current = ""
    for line in nm_text.splitlines():
        if line.endswith(":") and not line.startswith(" "):
            current = line[:-1]
            members.setdefault(current, (set(), set()))
            continue
        m = NM_LINE.match(line)
        if not m:
            continue
        kind, name = m.groups()
        defined, undefined = members.setdefault(current, (set(), set()))
        if kind == "U":
            undefined.add(name)
        elif kind not in "wv":  # a weak reference left undefined is no definition
            defined.add(name)
    return members


def call_violations(label: str, archive: dict, allowed: list[dict], kernels: dict) -> list[str]:
    """One line per function `archive` calls (a dlb:: symbol, or any symbol
    dlb_kernels defines) that neither it nor the `allowed` archives define."""
    defined = set().union(*(d for a in [archive, *allowed] for d, _ in a.values()))
    in_kernels = set().union(*(d for d, _ in kernels.values()))
    found = []
    for member, (_, undefined) in sorted(archive.items()):
        for name in sorted(undefined - defined):
            if "dlb::" in name or name in in_kernels:
                found.append(f"{label} {member}: calls {name}, defined in no description")
    return found


def nm(archive: str) -> dict:
    tool = os.environ.get("DLB_NM", "nm")
    out = subprocess.run([tool, "-C", archive], capture_output=True, text=True, check=True)
    return symbols(out.stdout)


def built(variable: str) -> str:
    """The value ctest passes in `variable` (tests/CMakeLists.txt)."""
    value = os.environ.get(variable)
    if value is None:
        raise AssertionError(f"${variable} is not set: run this test through ctest (tests/CMakeLists.txt sets it)")
    return value


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


class ReferenceLinksNoKernel(unittest.TestCase):
    """The built libraries: what CMake links them to, and what they call."""

    maxDiff = None

    def test_reference_and_descriptions_link_no_kernels(self):
        links = {t: [lib for lib in built(f"DLB_LINKS_{t}").split(",") if lib] for t in LINKS}
        self.assertEqual(link_violations(links), [])
        self.assertIn("dlb_description", links["dlb_reference"])

    def test_reference_calls_only_descriptions(self):
        reference = nm(built("DLB_REFERENCE_LIB"))
        description = nm(built("DLB_DESCRIPTION_LIB"))
        common = {m: s for m, s in nm(built("DLB_COMMON_LIB")).items() if m in COMMON_ALLOWED}
        self.assertEqual(len(common), len(COMMON_ALLOWED), "dlb_common has no member " + " ".join(COMMON_ALLOWED))
        kernels = nm(built("DLB_KERNELS_LIB"))
        found = call_violations("dlb_reference", reference, [description, common], kernels)
        found += call_violations("dlb_description", description, [common], kernels)
        self.assertEqual(found, [])
        # The check reads real archives: the reference calls what it should
        # find there (a draw of the augmentation, the trainable tensors).
        calls = set().union(*(u for _, u in reference.values()))
        self.assertTrue(any(name.startswith("dlb::nn::augment_of(") for name in calls), "nm found no augment_of call")

    def test_the_check_sees_a_kernel_link_and_a_kernel_call(self):
        self.assertEqual(link_violations({"dlb_reference": ["dlb_common", "dlb_kernels"], "dlb_description": []}),
                         ["dlb_reference links dlb_kernels"])
        reference = symbols("\nnn.cpp.o:\n0000000000000000 T dlb::ref::own()\n                 U dlb::ref::own()\n"
                            "                 U dlb::nn::augment_of(unsigned long, long, dlb::nn::Augment const&)\n"
                            "                 U dlb::nn::load_batch(int)\n                 U memcpy\n"
                            "                 U kernel_entry\n")
        description = symbols("augment.cpp.o:\n0000000000000000 T dlb::nn::augment_of(unsigned long, long, "
                              "dlb::nn::Augment const&)\n")
        kernels = symbols("loader.cpp.o:\n0000000000000000 T dlb::nn::load_batch(int)\n"
                          "0000000000000000 T kernel_entry\n")
        self.assertEqual(call_violations("dlb_reference", reference, [description], kernels),
                         ["dlb_reference nn.cpp.o: calls dlb::nn::load_batch(int), defined in no description",
                          "dlb_reference nn.cpp.o: calls kernel_entry, defined in no description"])


if __name__ == "__main__":
    sys.exit(unittest.main())
