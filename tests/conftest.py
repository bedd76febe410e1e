"""Every test session gets its own response cache, so cached answers never leak between runs."""

import os
import tempfile

os.environ["INFERFRAME_CACHE_DIR"] = tempfile.mkdtemp(prefix="inferframe-test-cache-")
os.environ.setdefault("INFERFRAME_PROGRESS", "0")
