"""The lazy, immutable ``DataFrame``: every method returns a new plan; nothing runs until asked.

Example:
    >>> import inferframe as ifr
    >>> df = ifr.from_pydict({"a": [1, 2, 3]}).where(ifr.col("a") > 1)
    >>> df.to_pydict()
    {'a': [2, 3]}
"""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa

from inferframe.dataframe.job import run_batches, write_in_workers
from inferframe.dataframe.exports import InteropMethods
from inferframe.dataframe.schema import Schema
from inferframe.dataframe.semantic import SemanticMethods
from inferframe.errors import ArgumentTypeError, PlanError
from inferframe.expressions.expression import Expression, col, to_node
from inferframe.expressions.nodes import Agg, Alias, Col, Node, column_not_found
from inferframe.functions._vocabulary import score_and_rank
from inferframe.plan import logical as lp
from inferframe.plan.ai_stages import project_nodes
from inferframe.plan.inspect import ai_notes, source_rows
from inferframe.plan.optimizer import optimize
from inferframe.dataframe.plan_runtime import runnable


def _expr(e: Any) -> Node:
    if isinstance(e, str):
        return Col(e)
    if isinstance(e, Expression):
        return e._node
    raise ArgumentTypeError(f"Expected a column name or an expression, got {type(e).__name__}: {e!r}; "
                            "pass e.g. 'review' or col('review').")


def _names(items) -> tuple[str, ...]:
    out = []
    for it in items:
        if isinstance(it, (list, tuple)):
            out.extend(_names(it))
        elif isinstance(it, str):
            out.append(it)
        elif isinstance(it, Expression) and isinstance(it._node, Col):
            out.append(it._node.column)
        else:
            raise ArgumentTypeError(f"Expected column names (strings), got {it!r}; pass e.g. 'review' or ['review', 'stars'].")
    return tuple(out)


class DataFrame(SemanticMethods, InteropMethods):
    """A lazy table: a logical plan plus, once collected, its result.

    Build one with ``from_pydict``, ``read_parquet`` and friends.
    """

    def __init__(self, plan: lp.LogicalPlan, result: pa.Table | None = None) -> None:
        self._plan = plan
        self._result = result

    # --- schema -------------------------------------------------------
    def schema(self) -> Schema:
        """The output columns and their types, known before anything runs."""
        return Schema(self._plan.schema)

    @property
    def column_names(self) -> list[str]:
        return list(self._plan.schema.names)

    @property
    def columns(self) -> list[Expression]:
        return [col(n) for n in self.column_names]

    def __getitem__(self, name: str) -> Expression:
        if not isinstance(name, str):
            raise ArgumentTypeError("df[...] takes one column name; use select() for several.")
        if self._plan.schema.get_field_index(name) < 0:
            raise column_not_found(name, self._plan.schema)
        return col(name)

    def __contains__(self, name: str) -> bool:
        return name in self.column_names

    # --- projections --------------------------------------------------
    def select(self, *columns: Any) -> "DataFrame":
        """Keep (and compute) these columns: names or expressions."""
        if not columns:
            raise PlanError("select() needs at least one column.")
        return DataFrame(project_nodes(self._plan, [_expr(c) for c in columns]))

    def with_column(self, name: str, expr: Any) -> "DataFrame":
        """Add or replace one column computed from an expression."""
        return self.with_columns({name: expr})

    def with_columns(self, columns: dict[str, Any]) -> "DataFrame":
        """Add or replace several columns: ``{"name": expression}``."""
        new = {name: Alias(to_node(e), name) for name, e in columns.items()}
        nodes: list[Node] = [new.pop(n) if n in new else Col(n) for n in self.column_names]
        nodes.extend(new.values())
        return DataFrame(project_nodes(self._plan, nodes))

    def with_column_renamed(self, existing: str, new: str) -> "DataFrame":
        if existing not in self.column_names:
            raise column_not_found(existing, self._plan.schema)
        return DataFrame(lp.Project(self._plan, tuple(Alias(Col(n), new) if n == existing else Col(n) for n in self.column_names)))

    def exclude(self, *names: str) -> "DataFrame":
        """Drop these columns."""
        drop = _names(names)
        for n in drop:
            if n not in self.column_names:
                raise column_not_found(n, self._plan.schema)
        return DataFrame(lp.Project(self._plan, tuple(Col(n) for n in self.column_names if n not in drop)))

    # --- row operations -----------------------------------------------
    def where(self, predicate: Expression) -> "DataFrame":
        """Keep rows where the predicate is true (null counts as false)."""
        return DataFrame(lp.Filter(self._plan, _expr(predicate)))

    filter = where

    def limit(self, n: int) -> "DataFrame":
        return DataFrame(lp.Limit(self._plan, n))

    def sort(self, by: Any, desc: bool | list[bool] = False, nulls_first: bool = False) -> "DataFrame":
        """Sort by one or more columns; ``desc`` may be one flag or one per column."""
        keys = list(by) if isinstance(by, (list, tuple)) else [by]
        nodes = [_expr(k) for k in keys]
        flags = list(desc) if isinstance(desc, (list, tuple)) else [desc] * len(nodes)
        if len(flags) != len(nodes):
            raise PlanError(f"sort() got {len(nodes)} keys but {len(flags)} desc flags.")
        plan, names = self._plan, []
        if any(not isinstance(n, Col) for n in nodes):
            extra = [Alias(n, f"__sort_{i}") for i, n in enumerate(nodes) if not isinstance(n, Col)]
            plan = lp.Project(plan, tuple(Col(c) for c in self.column_names) + tuple(extra))
        for i, n in enumerate(nodes):
            names.append(n.column if isinstance(n, Col) else f"__sort_{i}")
        out = lp.Sort(plan, tuple(names), tuple(bool(f) for f in flags), nulls_first)
        if plan is not self._plan:
            out = lp.Project(out, tuple(Col(c) for c in self.column_names))
        return DataFrame(out)

    def distinct(self, *on: str) -> "DataFrame":
        """Drop duplicate rows (or rows with duplicate values in ``on``), keeping the first."""
        return DataFrame(lp.Distinct(self._plan, _names(on) or None))

    unique = distinct
    drop_duplicates = distinct

    def explode(self, *columns: Any) -> "DataFrame":
        """One row per list element; empty or null lists give one row with null."""
        return DataFrame(lp.Explode(self._plan, _names(columns)))

    def join(self, other: "DataFrame", on: Any = None, left_on: Any = None, right_on: Any = None,
             how: str = "inner", prefix: str = "right.") -> "DataFrame":
        """Join with another DataFrame on key columns (inner, left, right, outer, semi, anti)."""
        if on is not None:
            left_on = right_on = on
        if left_on is None or right_on is None:
            raise PlanError("join() needs on=... or both left_on=... and right_on=...")
        lk = _names(left_on if isinstance(left_on, (list, tuple)) else [left_on])
        rk = _names(right_on if isinstance(right_on, (list, tuple)) else [right_on])
        return DataFrame(lp.Join(self._plan, other._plan, lk, rk, how, prefix))

    def nearest(self, other: "DataFrame", *, on: Any, other_on: Any = None, k: int = 5, metric: str = "cosine",
                column: str | None = None, prefix: str = "right.", **options: Any) -> "DataFrame":
        """For every row, the ``k`` rows of ``other`` whose vectors are closest (exact top-k search).

        Parameters:
            other: the index side; its plan runs once, when this plan runs, and is held in memory.
            on: this DataFrame's vector column (``fixed_size_list<float>`` or ``list<float>``).
            other_on: ``other``'s vector column (default: ``on``).
            k: matches per row; fewer when ``other`` has fewer rows with a vector.
            metric: "cosine" (default) or "dot", highest first; or "l2", the Euclidean distance, lowest first.
            column: the score's column (float32), its 1-based rank (int64) in ``<column>_rank``; default score, rank.
            prefix: put before ``other``'s column names that clash with this DataFrame's, like ``join``.

        Returns this DataFrame's columns, then ``other``'s, then the score and rank: one row per
        match, in this DataFrame's row order and rank order. A row whose vector is null (or, for
        "cosine", all zeros) has no match and gives no row; such rows of ``other`` are never matches.
        The search is lazy: ``other`` runs when the plan runs (once per run), then this side is
        streamed in batches, one matrix product per batch.

        Example:
            >>> import inferframe as ifr
            >>> q = ifr.from_pydict({"q": ["x"], "v": [[1.0, 0.0]]})
            >>> docs = ifr.from_pydict({"doc": ["a", "b"], "v": [[0.0, 1.0], [1.0, 0.1]]})
            >>> q.nearest(docs, on="v", k=1).select("q", "doc", "rank").to_pydict()
            {'q': ['x'], 'doc': ['b'], 'rank': [1]}
        """
        score, rank = score_and_rank("nearest", column, options)
        (left_col,), (right_col,) = _names([on]), _names([other_on if other_on is not None else on])
        return DataFrame(lp.Nearest(self._plan, other._plan, left_col, right_col, k, metric, score, rank, prefix))

    def concat(self, other: "DataFrame") -> "DataFrame":
        """Rows of this DataFrame followed by rows of ``other`` (same columns)."""
        return DataFrame(lp.Concat((self._plan, other._plan)))

    union_all = concat

    def into_batches(self, batch_size: int) -> "DataFrame":
        """Re-cut the stream into batches of exactly ``batch_size`` rows."""
        return DataFrame(lp.IntoBatches(self._plan, batch_size))

    def repartition(self, num: int | None, *by: Any) -> "DataFrame":
        """Split into ``num`` partitions (hash-grouped by ``by`` when given)."""
        return DataFrame(lp.Repartition(self._plan, num, _names(by)))

    # --- aggregation --------------------------------------------------
    def groupby(self, *keys: Any) -> "GroupedDataFrame":
        return GroupedDataFrame(self, [_expr(k) for k in keys])

    group_by = groupby

    def agg(self, *aggs: Any) -> "DataFrame":
        """Aggregate the whole table to one row: ``df.agg(col("x").sum())``."""
        return GroupedDataFrame(self, []).agg(*aggs)

    def count(self) -> "DataFrame":
        return self.agg(*[col(n).count() for n in self.column_names[:1]]) if self.column_names else self

    # --- results ------------------------------------------------------
    def _optimized(self) -> lp.LogicalPlan:
        """The plan as explain() and estimate() show it: whole-table operators not run."""
        return optimize(self._plan)

    def _runnable(self) -> lp.LogicalPlan:
        """The plan a run executes: semantic operators planned, whole-table ones computed first, once."""
        return optimize(runnable(self._plan, DataFrame))

    def iter_batches(self, progress: bool | None = None, report: str | None = None) -> Iterator[pa.RecordBatch]:
        """Stream the result as Arrow record batches, running the plan lazily.

        Parameters:
            progress: show the progress line for AI calls (None: on terminals and in notebooks).
            report: write the run's HTML report to this path when the job ends (jobs with AI calls).
        """
        if self._result is not None:
            yield from self._result.to_batches()
            return
        yield from run_batches(self._runnable(), progress, report)

    def to_arrow(self, progress: bool | None = None, report: str | None = None) -> pa.Table:
        """Run the plan and return the whole result as a pyarrow Table (``report=path``: the run's HTML report too)."""
        if self._result is not None:
            return self._result
        batches = list(self.iter_batches(progress, report))
        return pa.Table.from_batches(batches, schema=self._plan.schema) if batches else self._plan.schema.empty_table()

    def collect(self, progress: bool | None = None, report: str | None = None) -> "DataFrame":
        """Run the plan and keep the result in memory; returns the materialised DataFrame."""
        if self._result is not None:
            return self
        table = self.to_arrow(progress, report)
        return DataFrame(lp.Source(lp.InMemory(table), table.schema), result=table)

    def to_pydict(self) -> dict[str, list]:
        return self.to_arrow().to_pydict()

    def to_pylist(self) -> list[dict]:
        return self.to_arrow().to_pylist()

    def to_pandas(self):
        return self.to_arrow().to_pandas()

    def iter_rows(self, progress: bool | None = None) -> Iterator[dict]:
        """Yield rows as dicts, streaming batch by batch."""
        for batch in self.iter_batches(progress):
            yield from batch.to_pylist()

    def __iter__(self):
        return self.iter_rows()

    def count_rows(self) -> int:
        if self._result is not None:
            return self._result.num_rows
        from inferframe.io import estimate_rows

        plan = self._runnable()
        n = source_rows(plan, estimate_rows)
        if n is not None:
            return n
        from inferframe.runners import get_runner

        return sum(b.num_rows for b in get_runner().run(plan))

    def estimate(self) -> dict:
        """Rows, tokens and dollars of every AI call in the plan, before any request is sent.

        Reads the data and evaluates the prompts' inputs, but calls no model. Output tokens
        are bounded by max_tokens when set (None otherwise); cost is None for unknown prices.
        ``cached_tokens`` are the input tokens the provider's prompt cache could serve when rows
        that share the start of their prompt go out together, and ``cache_saving_usd`` what that
        would save at the cached-input rate (``cost_usd`` is the price without any cache hit).

        Example:
            >>> import inferframe as ifr
            >>> from inferframe.functions import prompt
            >>> df = ifr.from_pydict({"q": ["hi", "yo"]})
            >>> df = df.with_column("a", prompt(ifr.col("q"), model="gemma-3-270m", max_tokens=10))
            >>> df.estimate()["calls"][0]["rows"]
            2
        """
        from inferframe.dataframe.estimates import estimate_plan

        return estimate_plan(self._optimized(), lambda plan: DataFrame(plan).iter_rows(progress=False))

    def __len__(self) -> int:
        return self.count_rows()

    def show(self, n: int = 8, max_width: int | None = 30, format: str | None = None) -> None:
        """Print the first ``n`` rows as a table (HTML in notebooks); long values are cut at ``max_width``.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1]}).show(-1)
            Traceback (most recent call last):
            ...
            inferframe.errors.PlanError: show(n=-1): n must be a whole number >= 0, the rows to print; to get every row use collect(), to_pydict() or to_pandas().
        """
        from inferframe.dataframe.display import in_notebook, render_html, render_text

        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise PlanError(f"show(n={n!r}): n must be a whole number >= 0, the rows to print; to get every row use "
                            "collect(), to_pydict() or to_pandas().")

        table = self.limit(n + 1).to_arrow() if self._result is None else self._result.slice(0, n + 1)
        more = table.num_rows > n
        table = table.slice(0, n)
        total = self._result.num_rows if self._result is not None else (n + 1 if more else None)
        if in_notebook():
            from IPython.display import HTML, display  # type: ignore

            display(HTML(render_html(table, max_width=max_width)))
            return
        text = render_text(table, max_width=max_width, total=total, format=format)
        if more and self._result is None:
            text = text.rsplit("\n", 1)[0] + f"\n(Showing first {n} rows)"
        print(text)

    def explain(self, show_all: bool = True, estimate: bool = False) -> str:
        """Print the logical plan, and with ``show_all`` the optimized plan too; returns the text.

        ``estimate=True`` adds each AI call's rows, input tokens and dollars (``estimate()``: it
        reads the data and evaluates the prompts' inputs, but calls no model).
        """
        parts = ["== Logical plan ==", self._plan.tree()]
        if show_all:
            parts += ["", "== Optimized plan ==", self._optimized().tree()]
            from inferframe.io import estimate_rows

            notes = ai_notes(self._optimized(), estimate_rows)
            parts += ["", "== AI calls (estimated) ==", *notes] if notes else []
        if estimate:
            from inferframe.plan.estimate_text import estimate_lines

            parts += ["", "== Estimate (data read, no model called) ==", *estimate_lines(self.estimate())]
        text = "\n".join(parts)
        print(text)
        return text

    def __repr__(self) -> str:
        state = "materialised" if self._result is not None else "lazy"
        return f"DataFrame({state}) [{self.schema()}]"

    def _repr_html_(self) -> str:
        from inferframe.dataframe.display import render_html

        if self._result is not None:
            return render_html(self._result.slice(0, 8))
        return f"<pre>{self.__repr__()}</pre>"

    # --- writers ------------------------------------------------------
    def _write(self, root: str, format: str, progress: bool | None = None, **options: Any) -> "DataFrame":
        from inferframe.io import write_dataset
        from inferframe.io.writers import PendingWrite
        from inferframe.runners import get_runner

        report = options.pop("report", None)
        if self._result is None and get_runner().writes_in_workers:
            # Workers write part files under the temporary directory; they appear in root at commit, all at once.
            pending = PendingWrite(str(root), format, self._plan.schema, **options)
            paths = write_in_workers(self._runnable(), pending, progress, report)
        else:
            paths = write_dataset(self.iter_batches(progress, report), self._plan.schema, str(root), format, **options)
        return in_memory(pa.table({"path": pa.array(paths)}))

    def to_ray_dataset(self):
        """This DataFrame as a Ray Dataset: the plan itself on the Ray runner, else the result's Arrow table.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1, 2]}).to_ray_dataset().count()   # doctest: +SKIP
            2
        """
        from inferframe.runners import get_runner

        dataset = get_runner().to_dataset(self._runnable()) if self._result is None else None
        if dataset is not None:
            return dataset
        import ray.data

        return ray.data.from_arrow(self.to_arrow())

    def write_parquet(self, root: str, **options: Any) -> "DataFrame":
        """Write a directory of Parquet files atomically; ``mode="error"`` (default: refuse a directory holding data), "overwrite" or "append"; returns the written paths."""
        return self._write(root, "parquet", **options)

    def write_lance(self, uri: str, table: str, mode: str = "create", progress: bool | None = None,
                    **options: Any) -> "DataFrame":
        """Stream into a LanceDB table; returns a DataFrame holding the table's path, like ``write_parquet``.

        Parameters:
            uri: the LanceDB database (a directory or object-store URI).
            table: the table name.
            mode: "create" (error if the table exists), "overwrite", or "append" (creates a missing table).
            progress: show the progress line for AI calls (None: on terminals only).
            **options: passed to ``lancedb.connect`` (e.g. ``storage_options``).

        Needs ``pip install "inferframe[lance]"``. Batches are written as the plan produces them;
        embedding columns (fixed-size float lists) become LanceDB vector columns.

        Example:
            >>> import tempfile
            >>> import inferframe as ifr
            >>> df = ifr.from_pydict({"id": [1], "v": [[0.1, 0.2]]})
            >>> with tempfile.TemporaryDirectory() as db:
            ...     df.write_lance(db, table="items").to_pydict()["path"][0].endswith("items.lance")
            True
        """
        from inferframe.io.lance import write_lance

        path = write_lance(self.iter_batches(progress), self._plan.schema, str(uri), table, mode, **options)
        return in_memory(pa.table({"path": pa.array([path])}))

    def write_csv(self, root: str, **options: Any) -> "DataFrame":
        """Write a directory of CSV files atomically; ``mode="error"`` (default: refuse a directory holding data), "overwrite" or "append"; returns the written paths."""
        return self._write(root, "csv", **options)

    def write_json(self, root: str, **options: Any) -> "DataFrame":
        """Write a directory of JSON-lines files atomically; ``mode="error"`` (default: refuse a directory holding data), "overwrite" or "append"; returns the written paths."""
        return self._write(root, "json", **options)


class GroupedDataFrame:
    """``df.groupby(keys)``: finish with ``.agg(...)``."""

    def __init__(self, df: DataFrame, keys: list[Node]) -> None:
        self.df = df
        self.keys = keys

    def agg(self, *aggs: Any) -> DataFrame:
        """Aggregate each group: ``.agg(col("x").sum().alias("total"), col("y").mean())``."""
        flat: list[Any] = []
        for a in aggs:
            flat.extend(a if isinstance(a, (list, tuple)) else [a])
        if not flat:
            raise PlanError("agg() needs at least one aggregation, e.g. col('x').sum().")
        schema = self.df._plan.schema
        pre: list[Node] = []
        key_names = []
        for k in self.keys:
            k.to_field(schema)
            key_names.append(k.name())
            pre.append(k)
        specs, out_fields = [], [k.to_field(schema).with_name(k.name()) for k in self.keys]
        for i, a in enumerate(flat):
            node = _expr(a)
            name = node.name()
            inner = node.child if isinstance(node, Alias) else node
            if not isinstance(inner, Agg):
                raise PlanError(f"agg() takes aggregations such as col('x').sum(); {node} is not one.")
            tmp = f"__agg_{i}"
            pre.append(Alias(inner.child, tmp))
            out_fields.append(inner.to_field(schema).with_name(name))
            specs.append((inner.op, tmp, name))
        names = [f.name for f in out_fields]
        if len(set(names)) != len(names):
            raise PlanError(f"agg() would produce duplicate column names {names}; give them distinct .alias() names.")
        plan = lp.Project(self.df._plan, tuple(pre))
        return DataFrame(lp.Aggregate(plan, tuple(key_names), tuple(specs), pa.schema(out_fields)))

    def count(self) -> DataFrame:
        return self.agg(col(self.keys[0].name()).count().alias("count"))


def in_memory(table: pa.Table) -> DataFrame:
    """A DataFrame over a table already in memory.

    Parameters:
        table: the rows.

    Example:
        >>> in_memory(pa.table({"a": [1, 2]})).count_rows()
        2
    """
    return DataFrame(lp.Source(lp.InMemory(table), table.schema))
