"""The committed figures the pages embed are drawn from the runs the pages
name now: each plots/<stem>.png carries the stamp scripts/plot.py --docs
writes (PNG text, read here with the standard library), and the stamp must
name the page, family and runs that plot.py's own mapping (docs_sources)
gives for that figure today, with the sha256 of each run file as committed.
A figure drawn from an older run, or before a run file was replaced, or by
anything but --docs, fails here naming the figure. The figures are not
redrawn: the mapping builds them (to learn which stems each family draws)
but renders nothing. The check itself is tried on a small tree drawn by
--docs from the fixtures, with stale stamps planted in it."""

import contextlib
import importlib.util
import io
import json
import shutil
import struct
import sys
import tempfile
import unittest
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "plot.py"
DATA = ROOT / "tests" / "data"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def load_plot():
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("dlbench_plot", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


plot = load_plot()


def png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """(type, body) of each chunk, CRCs checked."""
    if data[:8] != PNG_SIGNATURE:
        raise ValueError("not a PNG file")
    chunks, pos = [], 8
    while pos < len(data):
        if pos + 12 > len(data):
            raise ValueError(f"truncated chunk at byte {pos}")
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if len(body) != length or zlib.crc32(kind + body) != crc:
            raise ValueError(f"bad {kind!r} chunk at byte {pos}")
        chunks.append((kind, body))
        pos += 12 + length
        if kind == b"IEND":
            break
    return chunks


def png_text(path: Path) -> dict[str, str]:
    """The PNG's text entries (tEXt, zTXt, iTXt), key -> text."""
    out = {}
    for kind, body in png_chunks(path.read_bytes()):
        key, _, rest = body.partition(b"\0")
        if kind == b"tEXt":
            out[key.decode("latin-1")] = rest.decode("latin-1")
        elif kind == b"zTXt":
            out[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        elif kind == b"iTXt":
            compressed, rest = rest[0], rest[2:]
            _language, _, rest = rest.partition(b"\0")
            _translated, _, text = rest.partition(b"\0")
            out[key.decode("latin-1")] = (zlib.decompress(text) if compressed else text).decode("utf-8")
    return out


def without_text(path: Path) -> bytes:
    """The PNG's bytes with its text chunks left out: the same pixels, unstamped."""
    out = [PNG_SIGNATURE]
    for kind, body in png_chunks(path.read_bytes()):
        if kind not in (b"tEXt", b"zTXt", b"iTXt"):
            out.append(struct.pack(">I4s", len(body), kind) + body + struct.pack(">I", zlib.crc32(kind + body)))
    return b"".join(out)


def with_text(path: Path, key: str, text: str) -> bytes:
    """The PNG's bytes, unstamped, with one tEXt entry put after its header."""
    data = without_text(path)
    body = key.encode("latin-1") + b"\0" + text.encode("latin-1")
    chunk = struct.pack(">I4s", len(body), b"tEXt") + body + struct.pack(">I", zlib.crc32(b"tEXt" + body))
    end_of_ihdr = 8 + 12 + 13
    return data[:end_of_ihdr] + chunk + data[end_of_ihdr:]


def problems(root: Path, sources: dict | None = None) -> list[str]:
    """What is wrong with the stamps of the figures the pages of `root` embed
    (`sources`: plot.docs_sources(root), if known); empty when each names what
    plot.py --docs would draw it from now."""
    found = []
    for stem, doc in sorted((sources or plot.docs_sources(root)).items()):
        figure = f"plots/{stem}.png"
        if doc.family is None:
            found.append(f"{figure} ({doc.page}): no generated block of its page draws it, so nothing says "
                         "what it was drawn from")
            continue
        png = root / figure
        if not png.is_file():
            found.append(f"{figure} ({doc.page}): missing")
            continue
        try:
            text = png_text(png).get(plot.STAMP_KEY)
        except ValueError as e:
            found.append(f"{figure}: {e}")
            continue
        if text is None:
            found.append(f"{figure}: not stamped (not drawn by scripts/plot.py --docs)")
            continue
        try:
            got = json.loads(text)
            runs = [(r["file"], r["sha256"]) for r in got["runs"]]
        except (ValueError, KeyError, TypeError) as e:
            found.append(f"{figure}: stamp is not what plot.py writes ({e!r}): {text[:200]}")
            continue
        drawn_from = (got.get("figure"), got.get("page"), got.get("family"), tuple(name for name, _ in runs))
        now = (figure, doc.page, doc.family, doc.sources)
        if drawn_from != now:
            found.append(f"{figure}: drawn from {drawn_from[1]}, {drawn_from[2]} from {' '.join(drawn_from[3])}; "
                         f"--docs draws it now from {doc.page}, {doc.family} from {' '.join(doc.sources)}")
            continue
        for name, digest in runs:
            if not (root / name).is_file():
                found.append(f"{figure}: its run {name} is missing")
            elif plot.sha256_of(root / name) != digest:
                found.append(f"{figure}: drawn from another {name} than the one committed "
                             f"(sha256 {digest[:12]}... in the stamp, {plot.sha256_of(root / name)[:12]}... now)")
    return found


def draw_docs(root: Path) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = plot.main(["--docs", "--root", str(root)])
    if rc != 0:
        raise AssertionError(f"plot.py --docs exit {rc}: {err.getvalue()}")
    return out.getvalue()


class CommittedFigures(unittest.TestCase):
    def test_each_embedded_figure_is_stamped_with_the_runs_its_page_names(self):
        sources = plot.docs_sources(ROOT)
        self.assertGreater(len(sources), 10)  # not vacuous: the pages embed figures
        found = problems(ROOT, sources)
        self.assertEqual(found, [], "stale figures: redraw them with scripts/plot.py --docs and commit them:\n  "
                         + "\n  ".join(found))


class PlantedStaleStamps(unittest.TestCase):
    """problems() on a tree --docs draws from the fixtures, then made stale."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.root = Path(self._tmp.name)
        (self.root / "docs").mkdir()
        (self.root / "results" / "m").mkdir(parents=True)
        for name in ("softmax_small.json", "networks_small.json"):
            shutil.copy(DATA / name, self.root / "results" / "m" / name)
        self.page = self.root / "docs" / "a.md"
        self.page.write_text("![softmax](../plots/softmax.png)\n"
                             "<!-- BEGIN GENERATED softmax FROM results/m/softmax_small.json -->\n"
                             "<!-- END GENERATED softmax -->\n")
        self.png = self.root / "plots" / "softmax.png"
        self.out = draw_docs(self.root)

    def tearDown(self):
        self._tmp.cleanup()

    def test_a_fresh_drawing_passes_and_its_stamp_names_its_source(self):
        self.assertIn("plots/softmax.png  (docs/a.md, softmax from results/m/softmax_small.json)", self.out)
        self.assertEqual(problems(self.root), [])
        stamp = json.loads(png_text(self.png)[plot.STAMP_KEY])
        run = self.root / "results" / "m" / "softmax_small.json"
        self.assertEqual(stamp["runs"], [{"file": "results/m/softmax_small.json", "sha256": plot.sha256_of(run)}])
        self.assertEqual((stamp["figure"], stamp["page"], stamp["family"]),
                         ("plots/softmax.png", "docs/a.md", "softmax"))
        self.assertEqual(stamp["module"], "scripts/dlbench/figures/softmax.py")
        self.assertEqual(stamp["module_sha256"], plot.sha256_of(ROOT / stamp["module"]))

    def test_an_unstamped_figure_fails(self):
        self.png.write_bytes(without_text(self.png))
        self.assertEqual(problems(self.root),
                         ["plots/softmax.png: not stamped (not drawn by scripts/plot.py --docs)"])

    def test_a_page_that_now_names_another_run_fails(self):
        # Today's case: the page's block moved to a newer run, the figure stayed.
        shutil.copy(DATA / "softmax_small.json", self.root / "results" / "m" / "newer.json")
        self.page.write_text(self.page.read_text().replace("softmax_small.json -->", "newer.json -->"))
        self.assertEqual(problems(self.root), [
            "plots/softmax.png: drawn from docs/a.md, softmax from results/m/softmax_small.json; "
            "--docs draws it now from docs/a.md, softmax from results/m/newer.json"])
        draw_docs(self.root)
        self.assertEqual(problems(self.root), [])

    def test_a_run_file_replaced_after_drawing_fails(self):
        run = self.root / "results" / "m" / "softmax_small.json"
        run.write_text(run.read_text() + "\n")
        found = problems(self.root)
        self.assertEqual(len(found), 1, found)
        self.assertTrue(found[0].startswith(
            "plots/softmax.png: drawn from another results/m/softmax_small.json than the one committed"), found)

    def test_a_planted_stamp_naming_another_run_fails(self):
        stale = json.loads(png_text(self.png)[plot.STAMP_KEY])
        stale["runs"] = [{"file": "results/m/networks_small.json",
                          "sha256": plot.sha256_of(self.root / "results" / "m" / "networks_small.json")}]
        self.png.write_bytes(with_text(self.png, plot.STAMP_KEY, json.dumps(stale)))
        self.assertEqual(problems(self.root), [
            "plots/softmax.png: drawn from docs/a.md, softmax from results/m/networks_small.json; "
            "--docs draws it now from docs/a.md, softmax from results/m/softmax_small.json"])

    def test_a_figure_the_first_block_draws_is_checked_against_that_block(self):
        # Two blocks of one family, as docs/training.md has: the first block
        # whose runs draw the figure is its source, as --docs draws it.
        shutil.copy(DATA / "softmax_small.json", self.root / "results" / "m" / "second.json")
        self.page.write_text(self.page.read_text()
                             + "<!-- BEGIN GENERATED softmax FROM results/m/second.json -->\n"
                             "<!-- END GENERATED softmax -->\n")
        self.assertEqual(plot.docs_sources(self.root)["softmax"].sources, ("results/m/softmax_small.json",))
        self.assertEqual(problems(self.root), [])
        # ... and a block before it that draws it takes it over.
        self.page.write_text("<!-- BEGIN GENERATED softmax FROM results/m/second.json -->\n"
                             "<!-- END GENERATED softmax -->\n" + self.page.read_text())
        self.assertEqual(len(problems(self.root)), 1)

    def test_an_embedded_figure_no_block_draws_fails(self):
        self.page.write_text(self.page.read_text() + "![made elsewhere](../plots/placement.png)\n")
        self.assertEqual(problems(self.root), [
            "plots/placement.png (docs/a.md): no generated block of its page draws it, so nothing says "
            "what it was drawn from"])


if __name__ == "__main__":
    unittest.main()
