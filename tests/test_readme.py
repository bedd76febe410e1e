"""Every ```python block of README.md, and its cheap ```bash lines, run as a reader runs them.

How a block runs:
- In a fresh process: the venv's Python (``sys.executable``) runs a script file holding the block,
  each line at its README line number (tracebacks and warnings name README lines).
- A block that begins with ``import inferframe as ifr`` starts a chain; any other block continues
  the chain of the block before it (the README writes them as one session): a chain runs once, its
  blocks one after the other in one process, and each block's test reads the output up to the mark
  its closing fence's line prints (a block that did not reach its mark fails with the process's exit).
  A chain whose later block names a hosted model runs twice: its blocks before that one without the
  key, as a reader who exported none, and the whole chain with it.
- The environment a reader has, built from nothing: ``PATH``, ``LANG`` and a ``HOME`` made for
  this module (so ``~/.cache`` starts empty and private, one reader's cache for the whole README).
  None of the test suite's variables reach it: no ``INFERFRAME_*``, no ``PYSPARK_PYTHON``, no
  cache directory, no provider. The one substitution: a chain that names a hosted model
  (``provider="openai"``, ``model="gpt-..."``) runs as for a reader who exported ``OPENAI_API_KEY``,
  with ``OPENAI_BASE_URL`` pointing at the project's simulator (OpenAI cannot be reached here).
- A working directory of its own, holding the repository's ``examples/`` and ``tests/data/``,
  the reader's own data the README names (``reviews/*.parquet``, ``docs/*.parquet``,
  ``photos/*.jpg``, ``papers/*.pdf``, ``tickets/*.parquet`` and ``models.py``), and ``.venv``
  (a link to the venv), so ``.venv/bin/inferframe ...`` lines run as written.
- Warnings: every warning the process prints (Python's ``file:line: Category: message`` on
  stderr, the default filters a reader has) must be one the README shows. A block shows one with
  a comment ``# warns: TruncatedWarning`` (several: ``# warns: A, B``); a block that shows a
  warning it does not give fails too.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK_TIMEOUT_S = 900  # a stuck block fails with its output instead of hanging the suite

_FENCE = re.compile(r"^```(python|bash)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_HOSTED = re.compile(r"""provider\s*=\s*["']openai["']|model\s*=\s*["']gpt-|--provider openai""")
_WARNS = re.compile(r"#\s*warns:\s*([A-Za-z_][\w]*(?:\s*,\s*[A-Za-z_]\w*)*)")
# Python's own warning lines (warnings.formatwarning): "path:line: Category: message".
_SHOWN = re.compile(r"^(?P<where>\S.*?):(?P<line>\d+): (?P<category>[A-Z]\w*): (?P<message>.*)$", re.M)
# Blocks that take minutes: a cascade calibrates every stage on its held-back rows of the local model.
_SLOW = re.compile(r"cascade=|sem_join\(|sem_cluster_by\(|sem_topk\(")
# The demo: 300 reviews on the local model (106 s on the 2-core machine, a few seconds for the others).
_SLOW_COMMAND = re.compile(r"examples/demo\.py")
# bash lines that are not cheap to run as written: the install, the whole test suite.
_NOT_CHEAP = re.compile(r"scripts/install\.sh|pytest")


@dataclass
class Block:
    line: int  # the README line of the block's first line of code
    heading: str
    code: str
    lang: str = "python"
    chain: int = 0  # python blocks of one chain run in one process
    nth: int = 1  # its place among the blocks under the same heading
    hosted: bool = field(init=False)
    warns: set[str] = field(init=False)

    def __post_init__(self) -> None:
        self.hosted = bool(_HOSTED.search(self.code))
        self.warns = warned(self.code)

    @property
    def id(self) -> str:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", self.heading).strip("-").lower()[:40]
        return slug if self.nth == 1 else f"{slug}-{self.nth}"


def warned(code: str) -> set[str]:
    """The warning categories a block's ``# warns: ...`` comments show.

    Example:
        >>> sorted(warned("x = 1  # warns: TruncatedWarning, DriftWarning\\n# warns: PromptLayoutHint"))
        ['DriftWarning', 'PromptLayoutHint', 'TruncatedWarning']
    """
    return {name.strip() for m in _WARNS.finditer(code) for name in m.group(1).split(",")}


def shown_warnings(stderr: str) -> list[tuple[str, str, str]]:
    """The warnings a process printed: (category, message, where) for each.

    Example:
        >>> shown_warnings("/w/readme.py:12: TruncatedWarning: 3 of 5 answers ...\\n  df.show()\\nok\\n")
        [('TruncatedWarning', '3 of 5 answers ...', '/w/readme.py:12')]
    """
    return [(m["category"], m["message"], f"{m['where']}:{m['line']}") for m in _SHOWN.finditer(stderr)]


def readme_blocks(text: str, lang: str = "python") -> list[Block]:
    """The README's ``lang`` blocks in order, each with its heading (and, for python, its chain)."""
    blocks, chain = [], -1
    for m in _FENCE.finditer(text):
        if m.group(1) != lang:
            continue
        before = text[: m.start()]
        line = before.count("\n") + 2
        headings = re.findall(r"^#+ (.+)$", before, re.M)
        code = m.group(2)
        if code.lstrip().startswith("import inferframe as ifr") or chain < 0:
            chain += 1
        heading = headings[-1] if headings else "intro"
        nth = 1 + sum(b.heading == heading for b in blocks)
        blocks.append(Block(line, heading, code, lang, chain, nth))
    return blocks


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))


@dataclass
class Command:
    line: int  # README line of the command's first line
    text: str  # the command as written, continuation lines joined
    warns: set[str]
    nth: int = 1  # its place among the commands of the same id

    @property
    def stem(self) -> str:
        words = [w for w in shlex.split(self.text.split("#")[0])[:3] if not w.startswith("-") and " " not in w]
        return re.sub(r"[^A-Za-z0-9.]+", "-", "-".join(Path(w).name for w in words))[:40].strip("-")

    @property
    def id(self) -> str:
        return self.stem if self.nth == 1 else f"{self.stem}-{self.nth}"


def bash_commands(text: str) -> list[Command]:
    """The README's bash lines (continuations joined), with the ``# warns:`` each shows."""
    out = []
    for block in readme_blocks(text, "bash"):
        lines, start = block.code.splitlines(), None
        joined = ""
        for i, raw in enumerate(lines):
            if start is None:
                start, joined = block.line + i, ""
            joined += raw.rstrip("\\").rstrip() + " " if raw.rstrip().endswith("\\") else raw
            if not raw.rstrip().endswith("\\"):
                # The install is done before the suite runs: what follows its "&&" runs as written.
                joined = re.sub(r"^\./scripts/install\.sh\s*&&\s*", "", joined.strip())
                if joined:
                    c = Command(start, joined, warned(joined))
                    c.nth = 1 + sum(o.stem == c.stem for o in out)
                    out.append(c)
                start = None
    return out


COMMANDS = bash_commands(README.read_text(encoding="utf-8"))
CHEAP = [c for c in COMMANDS if not _NOT_CHEAP.search(c.text)]


def test_the_readme_blocks_are_found():
    """The parser sees every block (a fence it missed would go untested)."""
    text = README.read_text(encoding="utf-8")
    assert len(BLOCKS) == text.count("```python") >= 14
    assert all(b.code.strip() for b in BLOCKS)
    assert len(readme_blocks(text, "bash")) == text.count("```bash")
    assert any(c.text.startswith(".venv/bin/inferframe prompt") for c in CHEAP)


def _reader_data(work: Path) -> None:
    """The repository's bundled data, and the reader's own files the README's examples name."""
    shutil.copytree(ROOT / "examples", work / "examples")
    shutil.copytree(ROOT / "tests" / "data", work / "tests" / "data")
    (work / ".venv").symlink_to(ROOT / ".venv")  # the reader's venv: `.venv/bin/inferframe` as written
    reviews = pacsv.read_csv(ROOT / "examples" / "data" / "reviews.csv")
    (work / "reviews").mkdir()
    pq.write_table(reviews.slice(0, 6), work / "reviews" / "part-0.parquet")  # a few rows: the hosted model is simulated
    (work / "docs").mkdir()
    docs = pa.table({"id": reviews["id"].slice(0, 20), "text": reviews["review"].slice(0, 20)})
    pq.write_table(docs, work / "docs" / "part-0.parquet")
    pq.write_table(docs, work / "docs.parquet")
    (work / "tickets").mkdir()
    pq.write_table(pa.table({"text": ["My X200 blender arrived broken. Refund me today!",
                                      "Which bulbs fit the desk lamp?"]}), work / "tickets" / "part-0.parquet")
    (work / "models.py").write_text(_ticket_model())
    (work / "photos").mkdir()
    for i, name in enumerate(sorted((ROOT / "examples" / "data" / "mcq").glob("*.png"))[:2]):
        from PIL import Image

        Image.open(name).convert("RGB").save(work / "photos" / f"photo-{i}.jpg", "JPEG")
    (work / "papers").mkdir()
    (work / "papers" / "paper-0.pdf").write_bytes(_tiny_pdf("A short paper about inference."))


def _ticket_model() -> str:
    """The README's ``Ticket`` model, as the reader's ``models.py`` (``--return-format models:Ticket``)."""
    text = README.read_text(encoding="utf-8")
    m = re.search(r"^class Ticket\(BaseModel\):\n(?:    .*\n)+", text, re.M)
    assert m, "README.md no longer defines class Ticket"
    return "from typing import Literal\nfrom pydantic import BaseModel, Field\n\n\n" + m.group(0)


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


def user_env(home: Path, sim_url: str | None = None) -> dict[str, str]:
    """The environment of a reader's shell, built from nothing: no variable of the test suite reaches it.

    ``sim_url``: the reader exported ``OPENAI_API_KEY`` (the simulator stands in for OpenAI).

    Example:
        >>> sorted(user_env(Path("/h"))), sorted(user_env(Path("/h"), "http://127.0.0.1:1/v1"))[:2]
        (['HOME', 'LANG', 'PATH'], ['HOME', 'LANG'])
    """
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    if sim_url is not None:
        env["OPENAI_API_KEY"] = "sk-readme-reader"
        env["OPENAI_BASE_URL"] = sim_url
    return env


@dataclass
class Ran:
    """One fresh process's outcome: exit code, output, and the warnings it printed."""

    rc: int
    stdout: str
    stderr: str

    @property
    def warnings(self) -> list[tuple[str, str, str]]:
        return shown_warnings(self.stderr)

    def check(self, what: str, shows: set[str], gives: set[str]) -> None:
        """Fail unless it exited 0 and printed exactly the warnings the README shows (``shows``; ``gives``: must appear)."""
        tail = f"\n--- stdout (end) ---\n{self.stdout[-3000:]}\n--- stderr (end) ---\n{self.stderr[-6000:]}"
        assert self.rc == 0, f"{what} exited {self.rc}{tail}"
        unshown = [w for w in self.warnings if w[0] not in shows]
        assert not unshown, (f"{what} printed warnings README.md does not show (add '# warns: <Category>' "
                             f"with an explanation, or fix the example): {unshown}{tail}")
        missing = gives - {w[0] for w in self.warnings}
        assert not missing, f"{what} shows '# warns: {', '.join(sorted(missing))}' but printed none{tail}"


def run_fresh(argv: list[str], cwd: Path, env: dict[str, str]) -> Ran:
    """Run ``argv`` in a fresh process with exactly ``env``."""
    try:
        p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Ran(124, out, err + f"\n(timed out after {BLOCK_TIMEOUT_S} s)")
    return Ran(p.returncode, p.stdout, p.stderr)


def script_of(block: Block) -> tuple[str, list[Block]]:
    """The script a reader runs for ``block``: the earlier blocks of its chain, then it, each at its README lines."""
    chain = [b for b in BLOCKS if b.lang == "python" and b.chain == block.chain and b.line <= block.line]
    return _script(chain), chain


def hosted_upto(block: Block) -> bool:
    """Whether the reader has exported ``OPENAI_API_KEY`` by ``block``: some block of its chain up to it names a hosted model."""
    return any(b.hosted for b in script_of(block)[1])


def run_of(block: Block) -> list[Block]:
    """The blocks one process runs for ``block``: its chain's blocks that run in the same environment, so each
    chain runs once (a block no longer runs the blocks before it again in a process of its own)."""
    chain = [b for b in BLOCKS if b.lang == "python" and b.chain == block.chain]
    return [b for b in chain if hosted_upto(b) == hosted_upto(block) or (b.line < block.line)]


def end_mark(block: Block) -> str:
    return f"@@README block at line {block.line} ran to its end@@"


def _script(blocks: list[Block], marks: bool = False) -> str:
    """``blocks`` each at its README lines; ``marks``: each block's end printed to stderr on its closing fence's line."""
    lines: list[str] = []
    for b in blocks:
        lines += [""] * (b.line - 1 - len(lines))
        lines += b.code.splitlines()
        if marks:  # the closing fence's line: blank in the script, so the README's own lines keep their numbers
            lines.append(f"__import__('sys').stderr.write({end_mark(b)!r} + '\\n'); __import__('sys').stderr.flush()")
    return "\n".join(lines) + "\n"


class Reader:
    """One reader: a fresh home (one cache for the whole README), a fresh working directory per process."""

    def __init__(self, root: Path, sim_url: str) -> None:
        self.root, self.sim_url = root, sim_url
        self.home = root / "home"
        self.home.mkdir(mode=0o700)
        self.n = 0
        self.runs: dict[tuple[int, bool], Ran] = {}

    def workdir(self) -> Path:
        self.n += 1
        work = self.root / f"work-{self.n}"
        work.mkdir()
        _reader_data(work)
        return work

    def run_block(self, block: Block) -> Ran:
        """What the reader saw up to the end of ``block``: its chain runs once, in one process, and each block's
        share is its output up to its end mark (a block that did not reach it failed, with the process's exit)."""
        blocks = run_of(block)
        key = (block.chain, hosted_upto(block))
        if key not in self.runs:
            work = self.workdir()
            script = work / f"readme_L{blocks[0].line}.py"
            script.write_text(_script(blocks, marks=True), encoding="utf-8")
            self.runs[key] = run_fresh([sys.executable, script.name], work,
                                       user_env(self.home, self.sim_url if key[1] else None))
        ran = self.runs[key]
        end = ran.stderr.find(end_mark(block))
        if end < 0:
            return Ran(ran.rc or 1, ran.stdout, ran.stderr)
        return Ran(0, ran.stdout, ran.stderr[:end])

    def run_command(self, command: Command) -> Ran:
        hosted = bool(_HOSTED.search(command.text))
        env = user_env(self.home, self.sim_url if hosted else None)
        return run_fresh(["/bin/bash", "-c", command.text], self.workdir(), env)


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    from inferframe.simulator import Simulator, SimulatorConfig

    with Simulator(SimulatorConfig()) as sim:
        yield Reader(tmp_path_factory.mktemp("readme"), sim.base_url)


@pytest.mark.parametrize(
    "block",
    [pytest.param(b, id=b.id, marks=[pytest.mark.slow] if _SLOW.search(script_of(b)[0]) else []) for b in BLOCKS],
)
def test_readme_block_runs(block: Block, reader: Reader):
    ran = reader.run_block(block)
    _, chain = script_of(block)
    ran.check(f"README.md:{block.line} ({block.heading})", set().union(*(b.warns for b in chain)), block.warns)


@pytest.mark.parametrize("command", [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if _SLOW_COMMAND.search(c.text) else [])
                                     for c in CHEAP])
def test_readme_command_runs(command: Command, reader: Reader):
    ran = reader.run_command(command)
    ran.check(f"README.md:{command.line} `{command.text[:80]}`", command.warns, command.warns)


def test_the_harness_fails_a_block_on_a_warning_the_readme_does_not_show(reader: Reader, tmp_path):
    """A warning the process prints is caught whether or not the block marks it (the marker is what passes it)."""
    code = "import warnings\nwarnings.warn('unannounced', UserWarning)\n"
    (tmp_path / "w.py").write_text(code)
    ran = run_fresh([sys.executable, "w.py"], tmp_path, user_env(reader.home))
    assert [w[:2] for w in ran.warnings] == [("UserWarning", "unannounced")]
    with pytest.raises(AssertionError, match="does not show"):
        ran.check("w.py", set(), set())
    ran.check("w.py", warned(code + "# warns: UserWarning"), set())


def test_a_block_sees_only_what_a_reader_has(reader: Reader, tmp_path):
    """The child process gets none of the suite's variables (conftest sets INFERFRAME_CACHE_DIR and INFERFRAME_PROGRESS)."""
    assert "INFERFRAME_CACHE_DIR" in os.environ  # the suite's own setting, which must not reach the reader
    code = "import os, json\nprint(json.dumps(sorted(os.environ)))\n"
    (tmp_path / "env.py").write_text(code)
    ran = run_fresh([sys.executable, "env.py"], tmp_path, user_env(reader.home))
    import json

    names = json.loads(ran.stdout)
    assert not [n for n in names if n.startswith(("INFERFRAME", "PYSPARK", "OPENAI"))], names
