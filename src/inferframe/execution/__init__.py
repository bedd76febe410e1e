"""The streaming executor: Arrow record batches through bounded queues; scans and UDF stages in their own threads.

Example:
    >>> import inferframe as ifr
    >>> from inferframe.execution.executor import execute
    >>> from inferframe.plan.physical import plan_physical
    >>> sum(b.num_rows for b in execute(plan_physical(ifr.from_pydict({"a": [1, 2, 3]})._plan)))
    3
"""
