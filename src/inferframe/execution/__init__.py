"""The streaming executor: Arrow record batches through bounded queues; scans and UDF stages in their own threads.

Example:
    >>> import inferframe as ifr
    >>> from inferframe.execution.executor import execute
    >>> sum(b.num_rows for b in execute(ifr.from_pydict({"a": [1, 2, 3]})._plan))
    3
"""
