"""scripts/install.sh never reuses a llama.cpp wheel built with other flags: shown with real pip.

pip's wheel cache keys a wheel by the location of the sdist it was built from, not by CMAKE_ARGS. The
install keeps the sdist under a path holding a stamp of the flags (``llama_build.sdist_dir``), so
other flags give another path and another cache entry. Here a tiny sdist records an environment
variable at build time, standing in for CMAKE_ARGS, and pip installs it three times.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from inferframe.providers.llama_build import build_stamp, portable_cmake_args, sdist_dir

SETUP = """\
import os
from setuptools import setup
os.makedirs("flagpkg", exist_ok=True)
with open(os.path.join("flagpkg", "__init__.py"), "w") as f:
    f.write("FLAGS = %r\\n" % os.environ.get("STAND_IN_CMAKE_ARGS", ""))
setup(name="flagpkg", version="1.0", packages=["flagpkg"])
"""


def _sdist(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, text in {"setup.py": SETUP, "PKG-INFO": "Metadata-Version: 2.1\nName: flagpkg\nVersion: 1.0\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"flagpkg-1.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _install(sdist: Path, flags: str, target: Path, pip_cache: Path) -> str:
    env = {**os.environ, "STAND_IN_CMAKE_ARGS": flags, "PIP_CACHE_DIR": str(pip_cache)}
    env.pop("PIP_NO_CACHE_DIR", None)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps",
                    "--target", str(target), f"flagpkg @ {sdist.as_uri()}"], check=True, env=env, capture_output=True, timeout=300)
    return (target / "flagpkg" / "__init__.py").read_text()


def test_other_flags_get_another_cached_wheel(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    portable, native = portable_cmake_args("x86_64"), "-DGGML_NATIVE=ON"
    assert build_stamp(portable) != build_stamp(native)
    a = _sdist(sdist_dir(portable) / "flagpkg-1.0.tar.gz")
    b = _sdist(sdist_dir(native) / "flagpkg-1.0.tar.gz")
    pip_cache = tmp_path / "pip-cache"

    assert portable in _install(a, portable, tmp_path / "t1", pip_cache)  # built, and cached
    assert native in _install(b, native, tmp_path / "t2", pip_cache)  # other flags: built again, not reused
    # The same path is answered from pip's cache whatever the flags say now: this is why the path
    # must hold the flags' stamp.
    again = _install(a, native, tmp_path / "t3", pip_cache)
    assert portable in again and native not in again
