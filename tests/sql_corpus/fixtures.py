"""The SQL tests' pytest fixtures over the corpus: its simulator (``corpus.simulated``) and its tables, one per module.

A test module imports them by name (``from sql_corpus.fixtures import frames, sim``) so that each of the SQL test
files sets up the simulator the same way, from one place.
"""

from __future__ import annotations

import pytest

from sql_corpus.corpus import simulated, tables


@pytest.fixture(scope="module")
def sim():
    """The corpus's simulator, the provider set to it and the cache off (``corpus.simulated``)."""
    with simulated() as s:
        yield s


@pytest.fixture(scope="module")
def frames():
    """The corpus's tables (reviews, products) as DataFrames."""
    return tables()
