"""In-process models: loaded once per worker, fed batches of rows (no HTTP, no runtime).

Example:
    >>> from inferframe.ai.vectors import unit_rows
    >>> import numpy as np
    >>> unit_rows(np.array([[3.0, 4.0]])).tolist()
    [[0.6, 0.8]]
"""
