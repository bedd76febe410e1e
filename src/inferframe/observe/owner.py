"""Which process owns a leftover (a temporary folder, a running run), and whether that process is gone.

A process killed outright (SIGKILL, power loss) cleans nothing up. Whatever it leaves behind carries
an owner tag, ``<machine>-<pid>``, so a later process can tell a dead owner's leftovers from a live
one's. The machine is the host name plus the pid namespace, so two containers with the same host
name and a shared volume never judge each other's pids. Only an owner on this machine can be
judged: elsewhere, or with an unreadable tag, it counts as alive (nothing is removed on a guess).
A pid the system has since given to another process also counts as alive: safe, never wrong.

Example:
    >>> tag = owner_tag()
    >>> owner_gone(tag), owner_gone("some-other-machine-12345"), owner_gone("not a tag")
    (False, False, False)
"""

from __future__ import annotations

import os
import re
import socket


def _machine() -> str:
    try:
        namespace = re.sub(r"\D", "", os.readlink("/proc/self/ns/pid"))  # 'pid:[4026531836]'
    except OSError:
        namespace = "0"
    # Only letters, digits and '.': the tag goes into file names, and '-' separates the pid.
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())[:64] + "." + namespace


def owner_tag() -> str:
    """This process, as ``<machine>-<pid>`` (letters, digits, '.', '_' and one '-')."""
    return f"{_machine()}-{os.getpid()}"


def owner_gone(tag: str) -> bool:
    """True when ``tag`` names a process of this machine that no longer runs."""
    machine, _, pid = tag.rpartition("-")
    if machine != _machine() or not pid.isdigit():
        return False
    return not _alive(int(pid))


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (EPERM), or a platform without signal 0
        return True
    # A zombie (killed, its parent has not reaped it yet) still answers signal 0 but runs no more.
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True
