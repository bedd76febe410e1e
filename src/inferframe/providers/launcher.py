"""Start a child process (llama-server) that cannot outlive this one, from one long-lived launcher thread.

``launch`` is the only entry; ``providers.local_server`` manages the server's life around it.

Example:
    >>> import sys, tempfile
    >>> with tempfile.TemporaryFile() as log:
    ...     launch([sys.executable, "-c", "print('hi')"], {}, log).wait()
    0
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import warnings

from inferframe.errors import LocalServerError

__all__ = ["launch"]

_PR_SET_PDEATHSIG = 1
_prctl = None
if sys.platform.startswith("linux"):
    try:
        # Looked up now, not in the forked child, where dlopen/dlsym could deadlock on locks
        # held by other threads of the parent at fork time.
        _prctl = ctypes.CDLL(None, use_errno=True).prctl
        _prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        _prctl.restype = ctypes.c_int
    except (OSError, AttributeError):
        _prctl = None

_launcher_requests: list[tuple[list[str], dict[str, str], int, list[object], threading.Event]] = []
_launcher_cv = threading.Condition()
_launcher_thread: threading.Thread | None = None


def launch(cmd: list[str], env: dict[str, str], log: object) -> subprocess.Popen[bytes]:
    """Spawn ``cmd`` so that it cannot outlive this process.

    atexit covers normal exits and Ctrl-C, but not SIGKILL, an unhandled SIGTERM, a segfault or
    os._exit. For those the child asks the kernel (Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, set
    between fork and exec and kept across exec) to kill it when its parent goes away.

    SIGKILL, not SIGTERM: llama-server cannot catch, ignore or lose it, so it dies whatever it is
    doing. With SIGTERM its graceful shutdown could hang for good (each seen with gdb):
    - the kernel sends the signal again each time the child is reparented: first to a thread of the
      dying parent that is still exiting, then to init. llama-server treats a second SIGTERM as
      "terminate immediately" and calls exit() inside its signal handler; when that lands while the
      first shutdown is inside free(), exit() waits forever for the malloc lock (1 in 7-15 runs of
      the SIGKILLed-parent test);
    - a SIGTERM after its handler is installed but before its main loop starts is lost (the loop
      sets its ``running`` flag back to true), and /health already answers 200 in that window;
    - with a request in flight on a connection that another process (a forked worker) keeps open, it
      was still up 60 s after SIGTERM.
    While the model is read from a cold disk, SIGKILL takes effect as soon as the current read returns.

    The kernel tracks the parent *thread*, not the process: a server spawned from a short-lived
    worker thread would be killed when that thread ends. So the spawn always happens on one daemon
    thread that lives as long as the process. The kernel signals only the process it forked, so
    ``cmd`` must be llama-server itself: a wrapper script given as the binary must ``exec`` it. The
    child also gets its own session so a terminal's Ctrl-C reaches only Python, which then shuts the
    server down cleanly via atexit instead of both dying mid-request.
    """
    global _launcher_thread
    result: list[object] = []
    done = threading.Event()
    with _launcher_cv:
        if _launcher_thread is None or not _launcher_thread.is_alive():
            _launcher_thread = threading.Thread(target=_launcher_loop, name="inferframe-llama-launcher", daemon=True)
            _launcher_thread.start()
        _launcher_requests.append((cmd, env, log.fileno(), result, done))  # type: ignore[attr-defined]
        _launcher_cv.notify()
    done.wait()
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]  # type: ignore[return-value]


def _launcher_loop() -> None:
    while True:
        with _launcher_cv:
            while not _launcher_requests:
                _launcher_cv.wait()
            cmd, env, log_fd, result, done = _launcher_requests.pop(0)
        try:
            result.append(_popen(cmd, env, log_fd))
        except BaseException as exc:  # handed to the caller's thread
            result.append(exc)
        done.set()


def _popen(cmd: list[str], env: dict[str, str], log_fd: int) -> subprocess.Popen[bytes]:
    parent = os.getpid()
    prctl = _prctl

    def set_parent_death_signal() -> None:
        # Runs in the child between fork and exec: only async-signal-safe work here.
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            # The parent may have died between fork and prctl; then no signal will ever come.
            if os.getppid() != parent:
                os._exit(1)

    try:
        with warnings.catch_warnings():
            # A preexec_fn runs the parent's at-fork hooks in the child, and some libraries warn there
            # (lancedb: "lancedb fork support is experimental ...", on the user's stderr). This child
            # runs no Python after the fork: it execs llama-server at once, so their concern is not its.
            warnings.filterwarnings("ignore", message=r"(?s).*\bfork", category=RuntimeWarning)
            return subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=subprocess.STDOUT,
                env=env,
                close_fds=True,
                start_new_session=True,
                preexec_fn=set_parent_death_signal if prctl is not None else None,
            )
    except OSError as exc:
        raise LocalServerError(f"could not run llama-server {cmd[0]!r}: {exc}") from exc


def _reinit_after_fork() -> None:
    # A fork taken while another thread held the queue's lock would deadlock the child forever.
    global _launcher_cv, _launcher_requests
    _launcher_cv = threading.Condition()
    _launcher_requests = []


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_after_fork)
