"""kernels/nn is a folder per concept, and the folders form layers: each may
include from kernels/nn only its own headers and those of the folders its
row of docs/architecture.md's table ("### kernels/nn") names. The table is
read from the page itself, so the page and the code cannot part; this test
holds the code to it and the table to having no cycle. The networks'
reference and benchmarks (MIRRORS) use the same folder names: every entry
there is a folder of the table."""

import re
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = Path("docs/architecture.md")
SOURCES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")

# The folders that hold the networks' files of the other layers, each a
# folder per kernels/nn folder it serves (docs/architecture.md).
MIRRORS = ("reference/nn", "bench/cases/nn", "bench/nn")

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
ROW = re.compile(r"^\|\s*`kernels/nn/([a-z0-9_]+)/`\s*\|.*\|\s*([^|]*?)\s*\|\s*$")


def rule(root: Path) -> dict[str, set[str]]:
    """folder -> the other folders it may include, from the page's table."""
    text = (root / PAGE).read_text(encoding="utf-8")
    section = text.split("### kernels/nn\n", 1)
    if len(section) != 2:
        raise ValueError(f"{PAGE}: no '### kernels/nn' section")
    allowed = {}
    for line in section[1].split("\n## ", 1)[0].splitlines():
        m = ROW.match(line)
        if not m:
            continue
        folder, may = m.groups()
        if folder in allowed:
            raise ValueError(f"{PAGE}: kernels/nn/{folder}/ has two rows")
        names = set(re.findall(r"`([a-z0-9_]+)`", may))
        if not names and may != "nothing":
            raise ValueError(f"{PAGE}: kernels/nn/{folder}/: '{may}' names no folder (write 'nothing')")
        allowed[folder] = names
    if not allowed:
        raise ValueError(f"{PAGE}: the kernels/nn section has no table of folders")
    return allowed


def cycle(allowed: dict[str, set[str]]) -> list[str]:
    """A cycle among the folders (the path round it), or [] if none."""
    done = set()

    def visit(node, path):
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return []
        for nxt in sorted(allowed.get(node, ())):
            found = visit(nxt, path + [node])
            if found:
                return found
        done.add(node)
        return []

    for node in sorted(allowed):
        found = visit(node, [])
        if found:
            return found
    return []


def violations(root: Path, allowed: dict[str, set[str]]) -> list[str]:
    """One line per file or include that breaks the rule."""
    found = []
    for folder, may in sorted(allowed.items()):
        for other in sorted(may - set(allowed)):
            found.append(f"{PAGE}: kernels/nn/{folder}/ may include '{other}', which is no folder of the table")
    nn = root / "kernels" / "nn"
    for path in sorted(nn.iterdir()):
        if path.is_dir() and path.name not in allowed:
            found.append(f"kernels/nn/{path.name}/: a folder the table in {PAGE} does not list")
        elif path.is_file() and path.name != "CMakeLists.txt":
            found.append(f"kernels/nn/{path.name}: a file outside the folders")
    for folder in sorted(allowed):
        if not (nn / folder).is_dir():
            found.append(f"kernels/nn/{folder}/: listed in {PAGE}, not in the tree")
    for path in sorted((root / "kernels").rglob("*")):
        if path.suffix not in SOURCES:
            continue
        rel = path.relative_to(root)
        parts = rel.parts
        inside = parts[1] == "nn"
        folder = parts[2] if inside and len(parts) > 3 else None
        for header in INCLUDE.findall(path.read_text(encoding="utf-8")):
            if not header.startswith("kernels/"):
                # A path relative to the file would slip past this check.
                found.append(f"{rel}: includes \"{header}\", not from the repository's root")
                continue
            hparts = Path(header).parts
            if hparts[1] != "nn":
                continue
            if not inside:
                found.append(f"{rel}: includes {header} (nothing else in kernels/ includes kernels/nn)")
                continue
            target = hparts[2] if len(hparts) > 3 else None
            if target is None or target not in allowed:
                found.append(f"{rel}: includes {header}, in no folder of the table")
            elif folder is not None and target != folder and target not in allowed.get(folder, set()):
                found.append(f"{rel}: includes {header}: kernels/nn/{folder}/ may not include kernels/nn/{target}/")
    return found


def mirror_violations(root: Path, allowed: dict[str, set[str]]) -> list[str]:
    """One line per entry of a MIRRORS folder that is not a folder named as
    one of kernels/nn's, and per MIRRORS folder missing or empty (a rename
    would otherwise leave nothing to check)."""
    found = []
    for mirror in MIRRORS:
        top = root / mirror
        if not top.is_dir() or not any(p.is_dir() for p in top.iterdir()):
            found.append(f"{mirror}/: missing or without folders")
            continue
        for path in sorted(top.iterdir()):
            if path.is_dir() and path.name not in allowed:
                found.append(f"{mirror}/{path.name}/: no folder of kernels/nn (the table in {PAGE})")
            elif not path.is_dir():
                found.append(f"{mirror}/{path.name}: a file outside the folders")
    return found


class NnFolders(unittest.TestCase):
    def test_every_include_follows_the_layers(self):
        self.assertEqual(violations(ROOT, rule(ROOT)), [])

    def test_reference_and_bench_use_kernels_nn_folder_names(self):
        self.assertEqual(mirror_violations(ROOT, rule(ROOT)), [])

    def test_the_layers_have_no_cycle(self):
        self.assertEqual(cycle(rule(ROOT)), [])

    def test_the_check_sees_a_wrong_include_a_stray_file_and_a_cycle(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "docs").mkdir()
            (root / PAGE).write_text(
                "# A\n\n### kernels/nn\n\n| folder | holds | may include |\n|---|---|---|\n"
                "| `kernels/nn/model/` | the description | nothing |\n"
                "| `kernels/nn/infer/` | the table | `model` |\n\n## Next\n"
                "| `kernels/nn/later/` | not in the section | `infer` |\n")
            for folder in ("model", "infer"):
                (root / "kernels" / "nn" / folder).mkdir(parents=True)
            (root / "kernels" / "gemm").mkdir()
            (root / "kernels/nn/model/network.h").write_text('#include "kernels/nn/infer/nn.h"\n')
            (root / "kernels/nn/infer/nn.h").write_text('#include "kernels/nn/model/network.h"\n#include "walk.h"\n')
            (root / "kernels/nn/loose.h").write_text("")
            (root / "kernels/gemm/gemm.h").write_text('#include "kernels/nn/model/network.h"\n')
            allowed = rule(root)
            self.assertEqual(allowed, {"model": set(), "infer": {"model"}})
            self.assertEqual(violations(root, allowed), [
                "kernels/nn/loose.h: a file outside the folders",
                "kernels/gemm/gemm.h: includes kernels/nn/model/network.h (nothing else in kernels/ includes kernels/nn)",
                'kernels/nn/infer/nn.h: includes "walk.h", not from the repository\'s root',
                "kernels/nn/model/network.h: includes kernels/nn/infer/nn.h: "
                "kernels/nn/model/ may not include kernels/nn/infer/",
            ])
            self.assertEqual(cycle(allowed), [])
            self.assertEqual(cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}), ["a", "b", "c", "a"])

    def test_the_check_sees_a_mirror_folder_kernels_nn_lacks(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            allowed = {"model": set(), "infer": {"model"}, "train": {"model"}}
            self.assertEqual(mirror_violations(root, allowed),
                             [f"{m}/: missing or without folders" for m in MIRRORS])
            for mirror in MIRRORS:
                (root / mirror / "infer").mkdir(parents=True)
            self.assertEqual(mirror_violations(root, allowed), [])
            (root / "reference/nn/inference").mkdir()
            (root / "bench/nn/nn_layers.cpp").write_text("")
            (root / "bench/cases/nn/train").mkdir()
            self.assertEqual(mirror_violations(root, allowed), [
                f"reference/nn/inference/: no folder of kernels/nn (the table in {PAGE})",
                "bench/nn/nn_layers.cpp: a file outside the folders",
            ])


if __name__ == "__main__":
    sys.exit(unittest.main())
