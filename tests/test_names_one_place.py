"""Case names are taken apart in one place: scripts/dlbench/names.py.

A static check over every Python module of scripts/ and tests/: outside
names.py no code splits a case name or a variant by hand. What it refuses:
- splitting on "_" or "/" (str.split, rsplit, partition, rpartition): the
  variant's words, device, implementation and precision, the name's parts
  (names.split_name, Name.device, Name.implementation, Name.precision,
  device_of, implementation_of, precision_of, words_of);
- any split of something called a variant;
- a device test by prefix, startswith("gpu_") and the like (device_of,
  Name.device), and a precision test by suffix, endswith("_s8") and the
  like (precision_of);
- a regular expression that reads a precision off a variant's end, such
  as "_(s8|bf16|f16)$" (precision_of).
The one exception is named below with its reason.
"""

from __future__ import annotations

import ast
import re
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAMES = ROOT / "scripts" / "dlbench" / "names.py"
SPLITS = ("split", "rsplit", "partition", "rpartition")
DEVICE_PREFIXES = {"cpu_", "gpu_", "peer_"}
PRECISION_SUFFIXES = {"_s8", "_int8", "_u8", "_bf16", "_f16", "_fp16", "_half", "_tf32", "_f32", "_fp32"}
# An alternation of precision words ending a variant ("_(s8|bf16|f16)$"): a
# precision read off a name. A filter that selects names by such words
# ("^gemm/peer_torch_(f32|bf16)/m:128/") builds names and is let be.
_WORD = r"(?:s8|int8|u8|bf16|f16|fp16|half|tf32|f32|fp32)"
PRECISION_REGEX = re.compile(rf"\({_WORD}(?:\|{_WORD})+\)[^/|]*\$")
# (file, why it may split on "/"): a descriptor flag's fields (--gemm=m:5/n:7/k:9,
# --net=resnet20/batch:64), a command line's input, not a case name.
ALLOWED = {("scripts/dlbench/peers/descriptors.py", "/"): "descriptor flags, not case names"}


def python_files() -> list[Path]:
    scripts = ROOT / "scripts"
    found = sorted(scripts.rglob("*.py"))
    # the executables without .py (scripts/peers, scripts/results, ...)
    found += sorted(p for p in scripts.iterdir()
                    if p.is_file() and p.suffix == "" and p.read_bytes()[:64].startswith(b"#!")
                    and b"python" in p.read_bytes()[:64])
    found += sorted((ROOT / "tests").glob("*.py"))
    return [p for p in found if p not in (NAMES, Path(__file__).resolve())]  # this file: the patterns it refuses


def _literals(node: ast.AST) -> list[str]:
    """The string constants of a call's first argument (one, or a tuple of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def offences(source: str, rel: str = "<snippet>") -> list[str]:
    """'file:line: what' for every hand-made take-apart of a name in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, receiver = node.func.attr, ast.unparse(node.func.value)
            first = _literals(node.args[0]) if node.args else []
            where = f"{rel}:{node.lineno}: {ast.unparse(node)[:80]}"
            if method in SPLITS:
                for sep in first:
                    if sep in ("_", "/") and (rel, sep) not in ALLOWED:
                        found.append(f"{where}: splits on {sep!r} (dlbench.names)")
                if "variant" in receiver.lower() and not any(s in ("_", "/") for s in first):
                    found.append(f"{where}: splits a variant (dlbench.names)")
            elif method == "startswith" and DEVICE_PREFIXES & set(first):
                found.append(f"{where}: a device by prefix (dlbench.names.device_of)")
            elif method == "endswith" and PRECISION_SUFFIXES & set(first):
                found.append(f"{where}: a precision by suffix (dlbench.names.precision_of)")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and PRECISION_REGEX.search(node.value):
            found.append(f"{rel}:{node.lineno}: {node.value!r}: a pattern over precision words "
                         "(dlbench.names.precision_of)")
    return found


class NamesInOnePlace(unittest.TestCase):
    def test_no_module_takes_a_name_apart_by_hand(self):
        found = []
        for path in python_files():
            found += offences(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
        self.assertEqual(found, [], "case names taken apart outside scripts/dlbench/names.py:\n" + "\n".join(found))

    def test_the_check_sees_what_it_refuses(self):
        # Each line is one hand-made take-apart the check must name.
        for snippet in ('device = variant.split("_", 1)[0]',
                        'precision = c.variant.rsplit("_", 1)[1]',
                        'variants = {n.split("/")[1] for n in listed}',
                        'op, _, rest = name.partition("/")',
                        'words = set(variant.split())',
                        'gpu = v.startswith("gpu_")',
                        'peer = v.startswith(("peer_", "x"))',
                        'int8 = v.endswith("_s8")',
                        'REDUCED = re.compile(r"_(s8|bf16|f16|tf32)(?:_cl)?$")'):
            with self.subTest(snippet=snippet):
                self.assertEqual(len(offences(snippet)), 1, offences(snippet))

    def test_the_check_lets_other_text_be(self):
        for snippet in ('cells = line.split("|")',
                        'key, _, value = part.partition(":")',
                        'hybrid = v.startswith("gpu_hybrid")',
                        'FILTER = r"^gemm/peer_torch_(f32|bf16)/m:128/|^daxpy/peer_torch/n:1024$"',
                        'version = torch.__version__.split("+")[0]'):
            with self.subTest(snippet=snippet):
                self.assertEqual(offences(snippet), [])

    def test_names_says_it(self):
        from_names = NAMES.read_text(encoding="utf-8")
        self.assertIn("tests/test_names_one_place.py", from_names)
        architecture = " ".join((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").split())
        self.assertTrue("`test_names_one_place`" in architecture,
                        "docs/architecture.md does not name test_names_one_place, the check of its rule")


if __name__ == "__main__":
    unittest.main()
