"""Every ```python block of README.md runs, as a reader would run it, offline.

How the blocks run:
- A block that begins with ``import inferframe as ifr`` starts a fresh namespace; any other block
  continues the namespace of the block before it (the README writes them as one session). Running
  one block's test alone first runs the blocks its namespace needs.
- The working directory is a temporary one holding the repository's ``examples/`` and ``tests/data/``
  and the reader's own data the README names (``reviews/*.parquet``, ``docs/*.parquet``,
  ``photos/*.jpg``, ``papers/*.pdf``), made here from the bundled reviews.
- No provider named: the embedded local model and the packaged MiniLM, as in the README. A block that
  names a hosted model (``provider="openai"``, ``model="gpt-..."``) runs as for a reader who exported
  ``OPENAI_API_KEY``, with ``OPENAI_BASE_URL`` pointing at the project's simulator.
- One response cache and run history for the whole README, as for one reader's session.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_HOSTED = re.compile(r"""provider\s*=\s*["']openai["']|model\s*=\s*["']gpt-""")
_SLOW = re.compile(r"cascade=")  # a cascade calibrates each stage on its held-back rows of the local model


@dataclass
class Block:
    line: int  # the README line of the block's first line of code
    heading: str
    code: str
    chain: int = 0  # blocks of one chain share a namespace
    nth: int = 1  # its place among the blocks under the same heading
    hosted: bool = field(init=False)

    def __post_init__(self) -> None:
        self.hosted = bool(_HOSTED.search(self.code))

    @property
    def id(self) -> str:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", self.heading).strip("-").lower()[:40]
        return slug if self.nth == 1 else f"{slug}-{self.nth}"


def readme_blocks(text: str) -> list[Block]:
    """The README's python blocks in order, each with its heading and chain."""
    blocks, chain = [], -1
    for m in _FENCE.finditer(text):
        before = text[: m.start()]
        line = before.count("\n") + 2
        headings = re.findall(r"^#+ (.+)$", before, re.M)
        code = m.group(1)
        if code.lstrip().startswith("import inferframe as ifr") or chain < 0:
            chain += 1
        heading = headings[-1] if headings else "intro"
        nth = 1 + sum(b.heading == heading for b in blocks)
        blocks.append(Block(line, heading, code, chain, nth))
    return blocks


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_blocks_are_found():
    """The parser sees every block (a fence it missed would go untested)."""
    fences = README.read_text(encoding="utf-8").count("```python")
    assert len(BLOCKS) == fences >= 14
    assert all(b.code.strip() for b in BLOCKS)


def _reader_data(work: Path) -> None:
    """The repository's bundled data, and the reader's own files the README's examples name."""
    shutil.copytree(ROOT / "examples", work / "examples")
    shutil.copytree(ROOT / "tests" / "data", work / "tests" / "data")
    reviews = pacsv.read_csv(ROOT / "examples" / "data" / "reviews.csv")
    (work / "reviews").mkdir()
    pq.write_table(reviews.slice(0, 6), work / "reviews" / "part-0.parquet")  # a few rows: the hosted model is simulated
    (work / "docs").mkdir()
    docs = pa.table({"id": reviews["id"].slice(0, 20), "text": reviews["review"].slice(0, 20)})
    pq.write_table(docs, work / "docs" / "part-0.parquet")
    (work / "photos").mkdir()
    for i, name in enumerate(sorted((ROOT / "examples" / "data" / "mcq").glob("*.png"))[:2]):
        from PIL import Image

        Image.open(name).convert("RGB").save(work / "photos" / f"photo-{i}.jpg", "JPEG")
    (work / "papers").mkdir()
    (work / "papers" / "paper-0.pdf").write_bytes(_tiny_pdf("A short paper about inference."))


def _tiny_pdf(text: str) -> bytes:
    """A one-page PDF with one line of text (written by hand: no PDF writer is a dependency)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


class Reader:
    """One reader's session: the working directory, the simulator, and each chain's namespace."""

    def __init__(self, work: Path, sim_url: str, cache: Path) -> None:
        self.work, self.sim_url, self.cache = work, sim_url, cache
        self.namespaces: dict[int, dict] = {}
        self.done: dict[int, Exception | None] = {}

    def run(self, block: Block, monkeypatch) -> None:
        """Run ``block`` after the blocks of its chain before it (each block runs once)."""
        for earlier in BLOCKS:
            if earlier.chain == block.chain and earlier.line < block.line and earlier.line not in self.done:
                self._run_one(earlier, monkeypatch)
            if earlier.chain == block.chain and earlier.line < block.line and self.done[earlier.line] is not None:
                pytest.fail(f"README.md:{earlier.line}, which this block continues, failed: {self.done[earlier.line]!r}")
        self._run_one(block, monkeypatch)
        if self.done[block.line] is not None:
            raise self.done[block.line]

    def _run_one(self, block: Block, monkeypatch) -> None:
        ns = self.namespaces.setdefault(block.chain, {"__name__": f"readme_{block.chain}"})
        # the reader's session: one cache and history, and a key only where the block names a hosted model
        monkeypatch.setenv("INFERFRAME_CACHE_DIR", str(self.cache))
        monkeypatch.setenv("OPENAI_BASE_URL", self.sim_url)
        if block.hosted:
            monkeypatch.setenv("OPENAI_API_KEY", "sk-readme-test")
        else:
            monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.chdir(self.work)
        code = compile("\n" * (block.line - 1) + block.code, str(README), "exec", dont_inherit=True)  # README lines
        try:
            exec(code, ns)
        except Exception as e:  # noqa: BLE001 - kept for the blocks that continue this one
            self.done[block.line] = e
        else:
            self.done[block.line] = None


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    import inferframe as ifr
    from inferframe.session import set_history
    from inferframe.session import reset_provider
    from inferframe.simulator import Simulator, SimulatorConfig

    work = tmp_path_factory.mktemp("readme")
    _reader_data(work)
    with Simulator(SimulatorConfig()) as sim:
        yield Reader(work, sim.base_url, tmp_path_factory.mktemp("readme-cache"))
    ifr.set_runner_native()
    reset_provider()
    set_history()


@pytest.mark.parametrize(
    "block",
    [pytest.param(b, id=b.id, marks=[pytest.mark.slow] if _SLOW.search(b.code) else []) for b in BLOCKS],
)
def test_readme_block_runs(block: Block, reader: Reader, monkeypatch):
    reader.run(block, monkeypatch)
