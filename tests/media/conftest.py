"""Shared fixtures for the media tests: the fixture folder and strict openai content-part validators."""

from __future__ import annotations

import pathlib

import pytest

DATA = pathlib.Path(__file__).resolve().parent / "data"


def read(name: str) -> bytes:
    """Bytes of a fixture file in tests/media/data (regenerate with data/make_fixtures.py)."""
    return (DATA / name).read_bytes()


@pytest.fixture(scope="session")
def validators():
    """Validate parts against the openai SDK TypedDicts; extra="forbid" makes a misspelled key fail."""
    import pydantic
    from openai.types.chat import ChatCompletionContentPartParam
    from openai.types.responses import ResponseInputContentParam

    config = pydantic.ConfigDict(extra="forbid", strict=True)
    return {
        "chat": pydantic.TypeAdapter(ChatCompletionContentPartParam, config=config),
        "responses": pydantic.TypeAdapter(ResponseInputContentParam, config=config),
    }
