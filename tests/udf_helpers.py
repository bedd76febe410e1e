"""Module-level UDF classes so worker processes can import them by reference."""

import os

import inferframe as ifr


@ifr.cls(use_process=True)
class PidTagger:
    def __init__(self, tag: str):
        self.tag = tag
        self.calls = 0

    def __call__(self, x: int) -> str:
        self.calls += 1
        return f"{self.tag}:{os.getpid()}:{self.calls}"

    @ifr.method.batch(return_dtype=ifr.DataType.int64(), batch_size=7)
    def sizes(self, xs: ifr.Series):
        return [len(xs)] * len(xs)

    def crash(self, x: int) -> int:
        if x == 3:
            os._exit(17)
        return x
