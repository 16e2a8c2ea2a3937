"""docs/architecture.md says which code switches over LayerKind: by_kind,
the one switch of the walk, and the name table beside it; and, until issue
43 moves the training steps onto the walk, the training steps' own switches
and the one-kernel pass's translation of kinds into its program. The page
lists them ("Switches over LayerKind"); this test finds every switch whose
cases are LayerKind's in kernels/ and reference/ and holds them to that
list, so a new switch fails it, and one that goes must leave the list."""

import re
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (".h", ".cpp", ".cu")
SWITCH = re.compile(r"\bswitch\s*\(")
LISTED = re.compile(r"^- `([^`]+)`: (\d+)\b", re.M)


def switches(root: Path) -> dict[str, int]:
    """file (relative) -> how many switches in it have LayerKind cases."""
    found: dict[str, int] = {}
    for top in ("kernels", "reference"):
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in SOURCES or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            for m in SWITCH.finditer(text):
                # The switch's body: from its brace to the matching one.
                start = text.find("{", m.end())
                depth, i = 0, start
                while i < len(text):
                    depth += {"{": 1, "}": -1}.get(text[i], 0)
                    if depth == 0:
                        break
                    i += 1
                if "case LayerKind::" in text[start:i]:
                    rel = str(path.relative_to(root))
                    found[rel] = found.get(rel, 0) + 1
    return found


def listed(root: Path) -> dict[str, int]:
    text = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("#### Switches over LayerKind\n", 1)
    if len(section) != 2:
        raise ValueError("docs/architecture.md: no '#### Switches over LayerKind' section")
    body = re.split(r"\n#{2,4} ", section[1], maxsplit=1)[0]
    return {f: int(n) for f, n in LISTED.findall(body)}


class LayerKindSwitches(unittest.TestCase):
    def test_the_page_lists_every_switch(self):
        self.assertEqual(switches(ROOT), listed(ROOT))

    def test_by_kind_is_the_walks_switch(self):
        self.assertEqual(listed(ROOT).get("kernels/nn/model/network.h"), 1)

    def test_a_new_switch_is_found(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "kernels").mkdir()
            (root / "reference").mkdir()
            (root / "kernels" / "x.cpp").write_text(
                "int f(Layer l) {\n  switch (l.kind) {\n    case LayerKind::conv: { return 1; }\n"
                "    default: return 0;\n  }\n}\nint g(int k) { switch (k) { case 1: return 2; } return 0; }\n")
            self.assertEqual(switches(root), {"kernels/x.cpp": 1})


if __name__ == "__main__":
    unittest.main()
