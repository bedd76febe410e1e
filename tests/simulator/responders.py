"""Responders imported by path in spawned simulators (keep this module import-light)."""


def shout(body: dict) -> str:
    """Prefix the last user message with SPAWNED."""
    return "SPAWNED " + body["messages"][-1]["content"]
