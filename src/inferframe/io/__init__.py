"""File input/output for inferframe: resolve paths, scan files as Arrow batches, write datasets.

Depends only on pyarrow (and optionally fsspec for extra protocols).

Example::

    >>> import pyarrow as pa, pyarrow.parquet as pq, tempfile
    >>> from inferframe.io import open_source, scan, source_schema, write_dataset
    >>> tmp = tempfile.TemporaryDirectory()
    >>> pq.write_table(pa.table({"id": [1, 2]}), f"{tmp.name}/in.parquet")
    >>> src = open_source("parquet", f"{tmp.name}/*.parquet")
    >>> [p.rsplit("/", 1)[1] for p in write_dataset(scan(src), source_schema(src), f"{tmp.name}/out", "csv")]
    ['part-00000.csv']
    >>> tmp.cleanup()
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
