"""A reqwest client built before os.fork() fails at once in the child with a message that says why.

Its Rust runtime thread stays in the parent: before, the child's request waited out its whole timeout
(120 s by default) for an answer that could not come.
"""

import asyncio
import os
import sys

import pytest

from inferframe.providers.http_interface import SendFailed
from inferframe.providers.http_reqwest import ReqwestTransport


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX's")
def test_a_client_built_before_a_fork_fails_at_once_in_the_child(tmp_path):
    transport = ReqwestTransport({}, timeout=30.0)
    said = tmp_path / "child.txt"
    pid = os.fork()
    if pid == 0:  # the child: one request through the parent's client, its error written down
        code = 3
        try:
            asyncio.run(transport.post("http://127.0.0.1:9/v1/chat/completions", b"{}"))
        except SendFailed as e:
            said.write_text(str(e))
            code = 0
        except BaseException as e:  # noqa: BLE001 - reported to the parent through the file
            said.write_text(f"unexpected {type(e).__name__}: {e}")
        finally:
            sys.stdout.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, said.read_text() if said.exists() else status
    assert "built in the parent process before os.fork()" in said.read_text()
    assert "'spawn'" in said.read_text()
    asyncio.run(transport.aclose())
