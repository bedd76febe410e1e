"""SQL with AI functions (``ifr.sql``, ``df.sql``, ``inferframe sql``), run by DuckDB over DataFrames.

The modules, each one job, imports flowing down the list:

- ``engine``: DuckDB's parse of a query (``json_serialize_sql``) and its connections;
- ``parse``: the AI calls of a query, read off the tree; ``functions``: what each AI function is in Python;
- ``planner``: each AI call becomes an AI column of the source it reads (``limit``, ``join``, ``aggregates``);
- ``filters``, ``reads``: what DuckDB's plan reads of each DataFrame; ``source``: the query's Arrow stream;
- ``explain``: ``EXPLAIN <query>``.

``inferframe/__init__.py`` imports this package before it binds ``ifr.sql`` (the function): Python sets a
package as an attribute of its parent when it is first imported, which would otherwise hide the function.

Example:
    >>> import inferframe as ifr
    >>> callable(ifr.sql)
    True
"""
