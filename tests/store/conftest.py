"""A real PostgreSQL 16 (pgserver, from PyPI) for the store tests: one server per session, one database per test."""

import atexit
import shutil
import tempfile
import urllib.parse
import uuid

import pgserver
import pytest

# The role's password: every test checks it never leaks. Unix-socket logins are trusted by
# pgserver's server, so the password is carried exactly as a remote one would be.
PASSWORD = "Pw-7q3Zk-never-shown"


def start_server():
    """A fresh PostgreSQL (its data under /tmp, which pgserver's own user may enter); (server, data dir).
    The data dir is removed when the process ends (pytest's tmp_path is closed to pgserver's user)."""
    data = tempfile.mkdtemp(prefix="inferframe-pg-")
    atexit.register(shutil.rmtree, data, ignore_errors=True)
    return pgserver.get_server(data, cleanup_mode="stop"), data


@pytest.fixture(scope="session")
def pg_server():
    server, data = start_server()
    server.psql(f"CREATE ROLE inferframe LOGIN PASSWORD '{PASSWORD}';")
    yield server
    server.cleanup()
    shutil.rmtree(data, ignore_errors=True)


def socket_dir(server) -> str:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(server.get_uri()).query)["host"][0]


@pytest.fixture
def pg_url(pg_server):
    """A fresh database owned by a role with a password, as its URL."""
    name = "t" + uuid.uuid4().hex[:12]
    pg_server.psql(f"CREATE DATABASE {name} OWNER inferframe;")
    return f"postgresql://inferframe:{PASSWORD}@/{name}?host={socket_dir(pg_server)}"
