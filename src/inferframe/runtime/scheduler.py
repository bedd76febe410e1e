"""Prefix-aware admission: rows that share a prompt prefix go out together, and to one server slot where the server has slots.

Every row waits here once, before its first attempt, in a window of pending rows (the AI stage
keeps ``prefix_window`` rows pending). When the runtime has room for another request, the
scheduler releases the row that best reuses what a server's prompt cache already holds:

- **Groups, by sorting.** The pending rows are sorted by prompt text; rows sharing the longest
  prefixes become neighbours, and the longest common prefix (LCP) of neighbours splits the sorted
  run into a tree (every row shares the root's prefix; a child shares more). Children go largest
  first at every level, so the biggest groups go out first and a group's sub-groups stay together.
  Sorting was chosen over a trie or block-hash bucketing because it needs no tuning (no block
  size) and runs in C: per row it costs O(log n) string comparisons (memcmp over the shared
  part), one LCP with its neighbour (a binary search over slice equality) and O(depth) integer
  work to split the tree; ``bench/prefix_schedule_cost.py`` measures it.
- **Rounds.** The rows pending when the previous round ran out are sorted into the next round;
  a row that arrives meanwhile and continues a group being sent joins that group at once (its
  prefix is warm), the rest wait for the next round. Every row is released within two rounds of
  arriving, and rounds never hold back the row the output waits for longer than the window.
- **Lanes.** A server with slots (llama.cpp) gets one lane per slot, each holding two requests:
  a lane keeps its group (so the slot's cache serves it, sent with ``id_slot``), a free lane takes
  the largest group nobody holds, and only when none is left helps the largest group held. Other
  servers (vLLM, SGLang, hosted APIs) get one lane whose groups go out in turn, a group's requests
  in flight together; the first row of the next group goes out while the current one ends, so its
  prefix is cached before the rest of its group arrives at the server.

Output order is not this module's concern: the operator puts every answer back in its row.

Example:
    >>> import asyncio
    >>> async def order():
    ...     sched, sent = PrefixScheduler(lanes=1), []
    ...     texts = ["doc A" + "a" * 80 + " q1", "doc B" + "b" * 80 + " q1", "doc A" + "a" * 80 + " q2"]
    ...     turns = [asyncio.ensure_future(sched.turn(t)) for t in texts]
    ...     for i, t in enumerate(turns):
    ...         t.add_done_callback(lambda t, i=i: sent.append(i))
    ...     await asyncio.gather(*turns)
    ...     return sent
    >>> asyncio.run(order())
    [0, 2, 1]
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
from typing import NamedTuple

from inferframe.runtime.prefix import common_prefix_len

# A shared start shorter than this (about 16 tokens) is not worth keeping a group together for.
MIN_SHARED_CHARS = 64
# Rows one stream releases ahead of their place in flight. Releasing in small bursts costs one
# pass of the event loop per burst instead of per row (bench/prefix_schedule_cost.py, 20,000 rows:
# the scheduling's CPU per row fell from 22.0 to 18.4 us with 16); a burst is still in group order.
# It also bounds how fast rows reach free slots: about AHEAD per two passes of a busy event loop. With
# 16, 512 slots at 200 ms held 280-300 requests in flight on 2 loaded CPUs (bare aiohttp about 350);
# with 128 (one batch of rows), 360-430 (issue 23).
AHEAD = 128
# A slot that holds nothing of a round's shared start joins the round only when the round's rows have at least
# this many times as many characters of their own as that start: the slot reads the start once more, and on a
# CPU server (prompt reading is compute-bound, so slots add no reading speed) parallel slots sped the demo by
# 1.24x (bench/local_model.py); a second slot for 8 few-shot rows read 970 tokens again for 50 a row.
JOIN_WORK = 4
# The tree is split this deep at most; below, rows stay in sorted order (which still keeps
# neighbours sharing the most together). Bounds the cost on pathological texts (a, aa, aaa, ...).
MAX_DEPTH = 8


class Turn(NamedTuple):
    """A released row: the lane it goes out on, and its group's cache-routing key ("": none worth sending)."""

    lane: int
    group: str


@dataclasses.dataclass(eq=False)
class _Group:
    prefix: str  # what every row of the group starts with
    key: str  # a stable name of the shared prefix: the cache-routing hint
    rows: collections.deque  # of (text, future), in sending order
    work: int = 0  # characters of its rows beyond the round's shared start: what a slot reads for it


def _key(prefix: str) -> str:
    return "ifr-" + hashlib.blake2b(prefix.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _order(texts: list[str], lcp: list[int], lo: int, hi: int, depth: int, out: list[int]) -> None:
    """Indexes lo..hi-1 of the sorted texts, sub-groups together and largest first."""
    if hi - lo <= 2 or depth >= MAX_DEPTH:
        out.extend(range(lo, hi))
        return
    shared = min(lcp[lo + 1:hi])
    children = []
    start = lo
    for i in range(lo + 1, hi):
        if lcp[i] == shared:
            children.append((start, i))
            start = i
    children.append((start, hi))
    children.sort(key=lambda c: c[0] - c[1])  # largest first; a stable sort keeps ties in text order
    for a, b in children:
        _order(texts, lcp, a, b, depth + 1, out)


def form_groups(texts: list[str]) -> list[tuple[str, list[int]]]:
    """Split rows into groups by shared prompt prefix: [(shared prefix, row indexes in sending order)], largest first.

    The groups are the children of the root of the sorted rows' LCP tree: every row shares the
    root's prefix (a system message, say), and the rows of one group share more (a document).

    Example:
        >>> a, b = "A" * 70, "B" * 70
        >>> [(p[:3], rows) for p, rows in form_groups([a + "1", b + "1", a + "2", a + "3"])]
        [('AAA', [0, 2, 3]), ('BBB', [1])]
    """
    return _groups(texts)


def _groups(texts: list[str]) -> list[tuple[str, list[int]]]:
    """``form_groups``."""
    order = sorted(range(len(texts)), key=texts.__getitem__)
    srt = [texts[i] for i in order]
    lcp = [0] + [common_prefix_len(x, y) for x, y in zip(srt, srt[1:])]
    n = len(srt)
    if n == 0:
        return []
    shared = min(lcp[1:]) if n > 1 else len(srt[0])
    bounds = [0] + [i for i in range(1, n) if lcp[i] == shared] + [n]
    groups = []
    for a, b in zip(bounds, bounds[1:]):
        idx: list[int] = []
        _order(srt, lcp, a, b, 1, idx)
        prefix = srt[a][:min(lcp[a + 1:b])] if b - a > 1 else srt[a]
        groups.append((prefix, [order[i] for i in idx]))
    groups.sort(key=lambda g: -len(g[1]))
    return groups


class PrefixScheduler:
    """Releases pending rows one at a time, in an order that keeps prompt caches warm.

    Parameters:
        lanes: server slots to keep apart (1: one stream, for servers without slots).
        pinned: each lane is one server slot (llama.cpp), released when its request is answered;
            otherwise the single lane keeps ``AHEAD`` (128) rows released ahead of their place in
            flight (``release`` is then called when the request holds an in-flight slot).
        depth: requests a pinned lane holds at once. Two keep the slot's next row waiting at
            the server, so the slot is never idle between rows: llama.cpp saves an idle slot
            to its RAM cache and clears it when another request arrives (``--cache-idle-slots``,
            on by default), and a request pinned to a cleared slot finds nothing cached.
            Measured on the embedded server, 4 slots, 8 passages of 250 words, 32 rows: one
            request per slot 11.8 s with most rows missing the slot's cache, two 7.9 s with 21
            of 32 hits (24 is the most: each passage's first row must read it).

    ``turn(text)`` waits for the row's release and says its lane; the caller calls
    ``release(lane)`` when the lane may take another row (see ``pinned``).
    """

    def __init__(self, lanes: int = 1, *, pinned: bool = False, depth: int = 2) -> None:
        self.lanes = max(1, int(lanes))
        self.pinned = pinned
        self.depth = max(1, int(depth)) if pinned else AHEAD
        self._arrivals: list[tuple[str, asyncio.Future]] = []
        self._round: collections.deque[_Group] = collections.deque()
        self._held: list[_Group | None] = [None] * self.lanes
        self._lane_prefix = [""] * self.lanes  # what each slot last read a group of (pinned lanes)
        self._root = ""  # what every row of the current round starts with
        self._round_work = 0  # ``work`` of the round's groups no lane has taken yet
        self._busy = [0] * self.lanes
        self._warmed: _Group | None = None  # the next group, looked at for warming (one lane)
        self._warm_due: _Group | None = None  # its first row goes out next
        self._pump_due = False
        self._absorbed, self._absorbed_by = 0, []  # arrivals[:n] continue none of these groups
        # One stream whose round has no two rows sharing MIN_SHARED_CHARS: no order worth keeping, so
        # the whole round is released at once instead of AHEAD rows per pass of the event loop.
        self._flat = False
        self.released = 0

    async def turn(self, text: str) -> Turn:
        """Wait until this row may be sent; returns its lane and its group's routing key."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._arrivals.append((text, fut))
        if not self._pump_due:
            # Run once the rows created in this tick have all arrived, so they are ordered together.
            self._pump_due = True
            loop.call_soon(self._pump)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(fut.result().lane)  # released to us, but we are gone: pass it on
            raise

    def put(self, text: str, row) -> None:
        """Hand a row over without waiting for it: ``row.set_result(turn)`` is called when it is released.

        ``row`` is anything with ``done()`` (True: nobody waits for it any more, so it is skipped) and
        ``set_result(turn)``, as a future has: the runtime's senders take released rows without a
        future or a task per row.
        """
        self._arrivals.append((text, row))
        if not self._pump_due:
            self._pump_due = True
            asyncio.get_running_loop().call_soon(self._pump)

    def release(self, lane: int) -> None:
        """The lane may take another row."""
        self._busy[lane] -= 1
        if not self._pump_due:
            self._pump_due = True
            asyncio.get_running_loop().call_soon(self._pump)

    def _pump(self) -> None:
        self._pump_due = False
        if self._arrivals:
            self._absorb()
        while self._release_one():
            pass

    def _release_one(self) -> bool:
        # The least busy lane first: every slot gets a row before any gets a second. A lane with
        # nothing to take leaves the row to the next one.
        lanes = (0,) if self.lanes == 1 else sorted(range(self.lanes), key=self._busy.__getitem__)
        for lane in lanes:
            if self._busy[lane] >= self.depth and not self._flat:
                return False
            picked = self._next(lane)
            if picked is not None:
                fut, group = picked
                self._busy[lane] += 1
                self.released += 1
                fut.set_result(Turn(lane, group.key))
                return True
        return False

    def _absorb(self) -> None:
        """Arrivals that continue a group being sent join it: the server holds its prefix now.

        Only arrivals not yet compared with the same groups are compared: ``_pump`` runs once per
        released row, and comparing every pending row each time cost 14% of the client's CPU at
        4,096 pending rows (py-spy, bench/prompt_throughput.py).
        """
        held = [g for g in dict.fromkeys(self._held) if g is not None and len(g.prefix) >= MIN_SHARED_CHARS]
        warmed = self._warmed
        if warmed is not None and len(warmed.prefix) >= MIN_SHARED_CHARS and warmed not in held:
            held.append(warmed)
        if not held:
            return
        prev = self._absorbed_by
        same = len(prev) == len(held) and all(a is b for a, b in zip(prev, held))
        start = self._absorbed if same else 0
        arrivals = self._arrivals
        if start >= len(arrivals):
            return
        rest = arrivals[:start]
        for text, fut in arrivals[start:] if start else arrivals:
            for g in held:
                if text.startswith(g.prefix):
                    g.rows.append((text, fut))
                    break
            else:
                rest.append((text, fut))
        self._arrivals = rest
        self._absorbed, self._absorbed_by = len(rest), held

    def _next(self, lane: int) -> tuple[asyncio.Future, _Group] | None:
        if self._warm_due is not None:
            nxt, self._warm_due = self._warm_due, None
            while nxt.rows:
                _, fut = nxt.rows.popleft()
                if not fut.done():
                    return fut, nxt
        group = self._held[lane]
        while True:
            if group is not None:
                while group.rows:
                    _, fut = group.rows.popleft()
                    if not fut.done():  # a cancelled row is skipped
                        if not self.pinned and self._warmed is None:
                            self._warm(group)
                        return fut, group
            group = self._take_group(lane)
            self._held[lane] = group
            if group is None:
                return None
            self._lane_prefix[lane] = group.prefix

    def _warm(self, group: _Group) -> None:
        """One lane: the next group's first row goes out next, so its prefix is cached when the group starts."""
        nxt = self._round[0] if self._round else None
        self._warmed = nxt if nxt is not None else group  # look once per group
        if nxt is not None and len(nxt.rows) > 1 and len(nxt.prefix) >= MIN_SHARED_CHARS:
            self._warm_due = nxt

    def _take_group(self, lane: int) -> _Group | None:
        self._warmed = None
        if not self._round and self._arrivals:
            self._form_round()
        if self._round:
            if self.pinned and not self._worth_a_cold_slot(lane):
                return None
            group = self._round.popleft()
            self._round_work -= group.work
            return group
        # Every group is held by a lane: help the one with the most rows left per lane holding it, when
        # the helper's cost (its slot reads the prefix once more) buys parallel work: more than two
        # rounds of its holders' places each. The tail of a group stays with its slots.
        holders = collections.Counter(id(g) for g in self._held if g is not None)
        best, most = None, 2 * self.depth
        for g in {id(g): g for g in self._held if g is not None}.values():
            per_lane = len(g.rows) / holders[id(g)]
            if per_lane > most:
                best, most = g, per_lane
        return best

    def _worth_a_cold_slot(self, lane: int) -> bool:
        """Whether this slot may take a group of the round: it holds the round's shared start already, no
        slot does, or the round's rows left have enough of their own to pay for reading the start again."""
        root = self._root
        if len(root) < MIN_SHARED_CHARS or self._lane_prefix[lane].startswith(root):
            return True
        if not any(p.startswith(root) for p in self._lane_prefix):
            return True
        return self._round_work >= JOIN_WORK * len(root)

    def _form_round(self) -> None:
        arrivals = [(t, f) for t, f in self._arrivals if not f.done()]
        self._arrivals = []
        self._absorbed = 0
        if not arrivals:
            return
        texts = [t for t, _ in arrivals]
        if not self.pinned and _flat(texts):
            # No two rows share MIN_SHARED_CHARS: no order worth keeping, so no tree, and no cache-routing key
            # (key "": a prompt cache has nothing to serve); the round goes out in arrival order, which the
            # output waits on. The tree and the routing cost 10 us a row of the prompt path's 80 (py-spy --gil,
            # issue 36).
            self._flat = True
            self._round.append(_Group("", "", collections.deque(arrivals)))
            return
        groups = _groups(texts)
        self._flat = False  # a round of one stream with no rows to keep together took the branch above
        root = groups[0][0] if len(groups) == 1 else _shared(texts)  # what every row of the round starts with
        self._root = root
        for prefix, idx in groups:
            # A lone row's key is the round's shared prefix: rows that share only that still route together.
            key = _key(prefix if len(idx) > 1 else root)
            # Only slots weigh a group's work (``_worth_a_cold_slot``): one stream sends every group in turn anyway.
            work = sum(len(texts[i]) for i in idx) - len(idx) * len(root) if self.pinned else 0
            self._round.append(_Group(prefix, key, collections.deque(arrivals[i] for i in idx), work))
            self._round_work += work


def _flat(texts: list[str]) -> bool:
    """No two of the texts share their first MIN_SHARED_CHARS characters (sorted, only neighbours can)."""
    heads = sorted(t[:MIN_SHARED_CHARS] for t in texts)
    return all(len(a) < MIN_SHARED_CHARS or a != b for a, b in zip(heads, heads[1:]))


def _shared(texts: list[str]) -> str:
    """The prefix every text starts with."""
    lo, hi = min(texts), max(texts)
    return lo[:common_prefix_len(lo, hi)]
