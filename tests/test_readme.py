"""scripts/readme.py: rewrites the generated blocks from JSON, only the
families asked for with --families, and --check says when README is stale.
Runs on the committed networks fixture."""

import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "scripts" / "readme.py"
FIXTURE = ROOT / "tests" / "data" / "networks_small.json"

TEXT = """# t
<!-- BEGIN GENERATED networks -->
old networks
<!-- END GENERATED networks -->
<!-- BEGIN GENERATED softmax -->
kept softmax
<!-- END GENERATED softmax -->
"""


def readme(*args):
    return subprocess.run([sys.executable, str(README), *args], capture_output=True, text=True)


class Readme(unittest.TestCase):
    def test_families_rewrites_only_those_blocks_and_check_agrees(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "README.md"
            path.write_text(TEXT)
            self.assertEqual(readme(str(FIXTURE), "--readme", str(path), "--families", "networks", "--check").returncode, 1)
            p = readme(str(FIXTURE), "--readme", str(path), "--families", "networks")
            self.assertEqual(p.returncode, 0, p.stderr)
            text = path.read_text()
            self.assertNotIn("old networks", text)
            self.assertIn("**resnet20**", text)
            self.assertIn(f"From `{FIXTURE.as_posix()}`", text)
            self.assertIn("kept softmax", text)
            self.assertEqual(readme(str(FIXTURE), "--readme", str(path), "--families", "networks", "--check").returncode, 0)

    def test_unknown_family_exits_2(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "README.md"
            path.write_text(TEXT)
            p = readme(str(FIXTURE), "--readme", str(path), "--families", "networkz")
            self.assertEqual(p.returncode, 2)
            self.assertIn("unknown families networkz", p.stderr)
            self.assertEqual(path.read_text(), TEXT)


if __name__ == "__main__":
    unittest.main()
