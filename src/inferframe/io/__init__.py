"""File input/output for inferframe: resolve paths, scan files as Arrow batches, write datasets.

Depends only on pyarrow (and optionally fsspec for extra protocols).

Example::

    >>> from inferframe.io import open_source, scan, write_dataset
    >>> src = open_source("parquet", "data/*.parquet")  # doctest: +SKIP
    >>> write_dataset(scan(src), source_schema(src), "out/", "csv")  # doctest: +SKIP
"""

from inferframe.io.errors import SchemaMismatchError
from inferframe.io.filesystems import display_path, filesystem_for
from inferframe.io.paths import resolve_file_infos, resolve_paths
from inferframe.io.readers import (
    GLOB_SCHEMA,
    ScanSource,
    estimate_rows,
    open_source,
    scan,
    source_schema,
)
from inferframe.io.writers import write_dataset

__all__ = [
    "GLOB_SCHEMA",
    "ScanSource",
    "SchemaMismatchError",
    "display_path",
    "estimate_rows",
    "filesystem_for",
    "open_source",
    "resolve_file_infos",
    "resolve_paths",
    "scan",
    "source_schema",
    "write_dataset",
]
