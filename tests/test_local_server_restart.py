"""A local server that died while running is replaced, with a warning that shows how it ended and its log's last lines."""

import os
import signal

import pytest

from inferframe.providers.local_server import get_local_server


def test_a_server_killed_while_running_is_replaced_and_its_log_tail_shown():
    server = get_local_server()
    os.kill(server.pid, signal.SIGABRT)
    server._proc.wait(30)
    with pytest.warns(RuntimeWarning) as caught:
        again = get_local_server()
    message = str(caught[0].message)
    assert again is not server and again._proc.poll() is None
    assert "SIGABRT" in message and "log tail:" in message and "Starting a new one." in message
    tail = message.split("log tail:\n", 1)[1].rsplit("\nStarting a new one.", 1)[0]
    assert tail.strip(), "the log tail is empty"
