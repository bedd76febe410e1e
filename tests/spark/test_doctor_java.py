"""`inferframe doctor` checks for Java when pyspark is installed, and says what to install when it is missing."""

from __future__ import annotations

import os
from pathlib import Path

from inferframe.doctor.cluster import check_java


def _fake_java(tmp_path: Path, version: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = bin_dir / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2021-01-01' >&2\n")
    java.chmod(0o755)
    return bin_dir


def test_java_17_on_this_machine_passes() -> None:
    check = check_java()
    assert check.status == "ok", check
    assert "Java 17" in check.found or "Java 2" in check.found


def test_no_java_fails_and_names_what_to_install(tmp_path) -> None:
    check = check_java({"PATH": str(tmp_path)})  # a PATH with no java, and no JAVA_HOME
    assert check.status == "fail"
    assert "no java" in check.found and "openjdk-17" in check.fix


def test_an_old_java_fails_and_names_the_version_needed(tmp_path) -> None:
    check = check_java({"PATH": str(_fake_java(tmp_path, "11.0.2")), "HOME": os.environ.get("HOME", "/")})
    assert check.status == "fail"
    assert "11.0.2" in check.found and "Java 17+" in check.found and "JAVA_HOME" in check.fix


def test_java_home_wins_over_path(tmp_path) -> None:
    home = _fake_java(tmp_path, "1.8.0_392").parent
    check = check_java({"PATH": os.environ["PATH"], "JAVA_HOME": str(home)})
    assert check.status == "fail" and str(home) in check.found

