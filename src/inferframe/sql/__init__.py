"""SQL with AI functions (``ifr.sql``, ``df.sql``, ``inferframe sql``), run by DuckDB over DataFrames.

The modules, each one job (their imports form no cycle):

- ``tree``: the query as DuckDB's syntax tree, parsed once (``json_serialize_sql``), rewritten as a tree
  and printed back (``json_deserialize_sql``); ``engine``: DuckDB connections over empty stand-ins;
- ``parse``: the AI calls of a query, read off the tree; ``functions``: what each AI function is in Python;
- ``nested``: CTEs and subqueries with AI calls, planned as queries of their own, what the outer query
  asks of them (WHERE, LIMIT) moved into them on the tree;
- ``planner``: each AI call becomes an AI column of the source it reads (``limit``, ``join``, ``aggregates``);
- ``filters``: each SELECT's WHERE on a DataFrame, off the tree, as a predicate run before its AI columns;
  ``reads``: the columns DuckDB's plan reads of each DataFrame; ``source``: the query's Arrow stream;
- ``explain``: ``EXPLAIN <query>``; ``writes``: ``COPY (...) TO`` and ``CREATE TABLE ... AS`` (read by sqlglot, their
  SELECT planned as any query), ``catalog``: the session tables ``CREATE TABLE`` makes.

``inferframe/__init__.py`` imports this package before it binds ``ifr.sql`` (the function): Python sets a
package as an attribute of its parent when it is first imported, which would otherwise hide the function.

Example:
    >>> import inferframe as ifr
    >>> callable(ifr.sql)
    True
"""
