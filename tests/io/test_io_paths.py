"""Path resolution: files, directories, globs, URIs, hidden files and error messages."""

from __future__ import annotations

import os
import pathlib
import uuid

import pyarrow.fs as pafs
import pytest

from inferframe.io import display_path, resolve_paths
from inferframe.io._glob import glob_to_regex, split_glob


def touch(root: pathlib.Path, *names: str) -> None:
    for name in names:
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(name)


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> pathlib.Path:
    touch(
        tmp_path,
        "b.csv",
        "a.csv",
        "c.parquet",
        "sub/d.csv",
        "sub/deeper/e.csv",
        "_SUCCESS",
        ".hidden.csv",
        "_tmp/f.csv",
        ".git/g.csv",
        "sub/_h.csv",
        "x1.txt",
        "x2.txt",
        "y1.txt",
    )
    return tmp_path


def rel(root: pathlib.Path, files: list[str]) -> list[str]:
    return [os.path.relpath(f, root) for f in files]


def test_single_file_and_pathlike(tree):
    fs, files = resolve_paths(tree / "a.csv")
    assert isinstance(fs, pafs.LocalFileSystem)
    assert files == [str(tree / "a.csv")]


def test_directory_recurses_sorted_and_skips_hidden(tree):
    _, files = resolve_paths(str(tree))
    assert rel(tree, files) == [
        "a.csv",
        "b.csv",
        "c.parquet",
        "sub/d.csv",
        "sub/deeper/e.csv",
        "x1.txt",
        "x2.txt",
        "y1.txt",
    ]


def test_directory_extension_filter(tree):
    _, files = resolve_paths(str(tree), extensions=["CSV"])
    assert rel(tree, files) == ["a.csv", "b.csv", "sub/d.csv", "sub/deeper/e.csv"]


def test_explicit_hidden_file_is_kept(tree):
    _, files = resolve_paths(str(tree / "_SUCCESS"))
    assert rel(tree, files) == ["_SUCCESS"]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("*.csv", ["a.csv", "b.csv"]),
        ("**/*.csv", ["a.csv", "b.csv", "sub/d.csv", "sub/deeper/e.csv"]),
        ("sub/**", ["sub/d.csv", "sub/deeper/e.csv"]),
        ("x?.txt", ["x1.txt", "x2.txt"]),
        ("[xy]1.txt", ["x1.txt", "y1.txt"]),
        ("[!x]1.txt", ["y1.txt"]),
        ("_tmp/*.csv", ["_tmp/f.csv"]),
        ("*/*.csv", ["sub/d.csv"]),
    ],
)
def test_globs(tree, pattern, expected):
    _, files = resolve_paths(str(tree) + "/" + pattern)
    assert rel(tree, files) == expected


def test_relative_glob_uses_cwd(tree, monkeypatch):
    monkeypatch.chdir(tree / "sub")
    _, files = resolve_paths("*.csv")
    assert files == [str(tree / "sub" / "d.csv")]


def test_list_is_deduplicated_and_sorted(tree):
    _, files = resolve_paths([str(tree / "b.csv"), str(tree / "*.csv"), tree / "a.csv"])
    assert rel(tree, files) == ["a.csv", "b.csv"]


def test_literal_name_with_glob_characters(tmp_path):
    touch(tmp_path, "weird[1].csv", "weird1.csv")
    _, files = resolve_paths(str(tmp_path / "weird[1].csv"))
    assert rel(tmp_path, files) == ["weird[1].csv"]


def test_file_uri(tree):
    _, files = resolve_paths("file://" + str(tree / "sub") + "/*.csv")
    assert files == [str(tree / "sub" / "d.csv")]


def test_missing_file_message_names_path_and_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as info:
        resolve_paths("data/nope.parquet")
    msg = str(info.value)
    assert "'data/nope.parquet'" in msg
    assert str(tmp_path) in msg
    assert "Check the path" in msg


def test_unmatched_glob_message(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as info:
        resolve_paths("data/*.parquet")
    msg = str(info.value)
    assert msg.startswith(f"No files match 'data/*.parquet' (checked from cwd {tmp_path})")
    assert "Check the path or glob" in msg


def test_each_list_entry_must_match(tree):
    with pytest.raises(FileNotFoundError, match="typo"):
        resolve_paths([str(tree / "a.csv"), str(tree / "typo*.csv")])


def test_directory_with_only_hidden_files(tmp_path):
    touch(tmp_path, "_SUCCESS", ".crc")
    with pytest.raises(FileNotFoundError, match="no readable files"):
        resolve_paths(str(tmp_path))


def test_extension_filter_mentioned_in_error(tree):
    with pytest.raises(FileNotFoundError, match=r"\.json"):
        resolve_paths(str(tree), extensions=[".json"])


def test_unknown_protocol_is_a_clear_value_error():
    with pytest.raises(ValueError, match="Unknown filesystem protocol 'nosuchfs://'"):
        resolve_paths("nosuchfs://bucket/x.parquet")


def test_missing_optional_package_is_named(monkeypatch):
    import sys

    # The embed extra installs huggingface_hub: hide it so the message for a missing package shows.
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(ValueError, match="pip install huggingface_hub"):
        resolve_paths("hf://datasets/org/name/data.parquet")


def test_fsspec_memory_filesystem_glob():
    import fsspec
    mem = fsspec.filesystem("memory")
    base = f"/io-test-{uuid.uuid4().hex}"
    for name in ["a.json", "b.json", "_c.json", "sub/d.json"]:
        mem.pipe(f"{base}/{name}", b"{}\n")
    try:
        fs, files = resolve_paths(f"memory://{base}/*.json")
        assert files == [f"{base}/a.json", f"{base}/b.json"]
        assert display_path(fs, files[0]) == f"memory://{base}/a.json"
        _, all_files = resolve_paths(f"memory://{base}")
        assert all_files == [f"{base}/a.json", f"{base}/b.json", f"{base}/sub/d.json"]
    finally:
        mem.rm(base, recursive=True)


def test_mixed_filesystems_rejected(tree):
    import fsspec
    name = f"/io-test-{uuid.uuid4().hex}.csv"
    fsspec.filesystem("memory").pipe(name, b"a\n1\n")
    try:
        with pytest.raises(ValueError, match="one filesystem"):
            resolve_paths([str(tree / "a.csv"), f"memory://{name}"])
    finally:
        fsspec.filesystem("memory").rm(name)


def test_empty_list_rejected():
    with pytest.raises(ValueError, match="No paths"):
        resolve_paths([])


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.csv", "a.csv", True),
        ("*.csv", "_a.csv", False),
        ("*.csv", "d/a.csv", False),
        ("**/*.csv", "a.csv", True),
        ("**/*.csv", "x/y/a.csv", True),
        ("**/*.csv", "x/.y/a.csv", False),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("[]x]", "]", True),
        ("[!a]", "/", False),
        ("[^a]", "^", True),
        ("f[", "f[", True),
    ],
)
def test_glob_regex(pattern, path, matches):
    assert bool(glob_to_regex(pattern).fullmatch(path)) is matches


def test_split_glob():
    assert split_glob("/data/2024/*/x.csv") == ("/data/2024", "*/x.csv")
    assert split_glob("/*.csv") == ("/", "*.csv")
    assert split_glob("*.csv") == ("", "*.csv")
