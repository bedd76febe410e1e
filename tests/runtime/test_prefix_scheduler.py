"""The prefix scheduler: groups by shared prompt prefix, largest first; lanes keep their group; answers stay in their rows."""

from __future__ import annotations

import asyncio
import random

from inferframe.providers import openai_format as wire
from inferframe.providers.interface import MockProvider, Outcome, Request
from inferframe.runtime import InferenceRuntime, RuntimeConfig
from inferframe.runtime.prefix import common_prefix_len, shared_prefix_chars
from inferframe.runtime.scheduler import PrefixScheduler, form_groups

DOCS = [f"Document {d}: " + (chr(ord("a") + d) * 300) + "\n" for d in range(6)]


def _interleaved(n_docs: int, per_doc: int) -> list[tuple[int, str]]:
    return [(d, DOCS[d] + f"Question {q}?") for q in range(per_doc) for d in range(n_docs)]


def test_common_prefix_len_agrees_with_a_plain_loop():
    rng = random.Random(3)
    for _ in range(300):
        a = "".join(rng.choice("ab") for _ in range(rng.randint(0, 40)))
        b = "".join(rng.choice("ab") for _ in range(rng.randint(0, 40)))
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        assert common_prefix_len(a, b) == n


def test_groups_are_the_shared_prefixes_largest_first_with_subgroups_together():
    sys = "S" * 100
    texts = ([sys + "A" * 80 + f"{i}" for i in range(3)] + [sys + "B" * 80 + f"{i}" for i in range(5)]
             + [sys + "B" * 80 + "x" * 80 + f"{i}" for i in range(2)] + [sys + "lone"])
    random.Random(1).shuffle(texts)
    groups = form_groups(texts)
    sizes = [len(rows) for _, rows in groups]
    assert sizes == [7, 3, 1]
    prefix, rows = groups[0]
    assert all(texts[i].startswith(sys + "B" * 80) for i in rows) and prefix.startswith(sys + "B" * 80)
    # Within the B group, the two rows sharing the longer "x" prefix sit next to each other.
    xs = [k for k, i in enumerate(rows) if "x" in texts[i]]
    assert xs[1] - xs[0] == 1
    assert sorted(i for _, r in groups for i in r) == list(range(len(texts)))


def test_shared_prefix_chars_counts_what_a_cache_could_serve():
    texts = ["P" * 50 + "1", "Q" * 10, "P" * 50 + "2"]
    assert shared_prefix_chars(texts) == [0, 0, 50]


async def _release_in_order(sched: PrefixScheduler, texts: list[str]) -> list[int]:
    """Release rows as a one-stream runtime does; the order they were handed out in."""
    sent: list[int] = []

    def done(i: int, t: asyncio.Task) -> None:
        sent.append(i)  # tasks finish in the order the scheduler woke them
        sched.release(t.result().lane)

    turns = [asyncio.ensure_future(sched.turn(t)) for t in texts]
    for i, t in enumerate(turns):
        t.add_done_callback(lambda t, i=i: done(i, t))
    await asyncio.gather(*turns)
    return sent


def test_one_stream_sends_each_group_together():
    rows = _interleaved(4, 5)
    order = asyncio.run(_release_in_order(PrefixScheduler(1), [t for _, t in rows]))
    docs = [rows[i][0] for i in order]
    # Each group goes out in one run, except that the next group's first row goes out early to warm its prefix.
    switches = sum(1 for a, b in zip(docs, docs[1:]) if a != b)
    assert switches <= 3 * 4
    interleaved_switches = sum(1 for a, b in zip([d for d, _ in rows], [d for d, _ in rows][1:]) if a != b)
    assert interleaved_switches == 19
    assert sorted(order) == list(range(20))


def test_the_next_groups_first_row_goes_out_early_to_warm_its_prefix():
    rows = _interleaved(3, 4)
    order = asyncio.run(_release_in_order(PrefixScheduler(1), [t for _, t in rows]))
    docs = [rows[i][0] for i in order]
    # The first row of the second group goes out right after the first row of the first group.
    assert docs[0] != docs[1] and docs.count(docs[0]) == 4
    assert docs[2:5] == [docs[0]] * 3


def test_pinned_lanes_keep_a_group_each_and_hold_one_request_at_a_time():
    async def run():
        sched = PrefixScheduler(2, pinned=True, depth=1)
        rows = _interleaved(4, 6)
        turns = [asyncio.ensure_future(sched.turn(t)) for _, t in rows]
        lane_docs: dict[int, list[int]] = {0: [], 1: []}
        done: set[int] = set()
        while len(done) < len(rows):
            await asyncio.sleep(0)
            ready = [i for i, t in enumerate(turns) if t.done() and i not in done]
            assert len(ready) <= 2  # at most one request per lane at a time
            lanes = [turns[i].result().lane for i in ready]
            assert len(set(lanes)) == len(lanes)
            for i in ready:
                done.add(i)
                lane_docs[turns[i].result().lane].append(rows[i][0])
                sched.release(turns[i].result().lane)
        return lane_docs

    lane_docs = asyncio.run(run())
    for docs in lane_docs.values():
        # A lane finishes a group before it takes another: its docs come in blocks of 6.
        blocks = [docs[k:k + 6] for k in range(0, len(docs), 6)]
        assert all(len(set(b)) == 1 for b in blocks), docs
    assert sorted(d for docs in lane_docs.values() for d in docs) == sorted(d for d, _ in _interleaved(4, 6))


def test_rows_that_share_nothing_go_out_one_by_one_and_all_of_them():
    texts = [f"{i:05d} unrelated" for i in range(200)]
    random.Random(0).shuffle(texts)
    order = asyncio.run(_release_in_order(PrefixScheduler(1), texts))
    assert sorted(order) == list(range(200))


def test_a_cancelled_row_gives_its_lane_back():
    async def run():
        sched = PrefixScheduler(1, pinned=True, depth=1)
        first = asyncio.ensure_future(sched.turn("a" * 100))
        second = asyncio.ensure_future(sched.turn("b" * 100))
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # the lane is handed to the first row, which has not woken up yet
        assert sched.released == 1 and not first.done()
        first.cancel()
        for _ in range(5):
            await asyncio.sleep(0)
        return first.cancelled(), second.done() and second.result().lane

    assert asyncio.run(run()) == (True, 0)


class _Chat(MockProvider):
    """A mock server of chat bodies that records the order and the hints it was sent."""

    def __init__(self, lanes=None):
        self.sent: list[dict] = []
        self.lanes = lanes
        self.busy: dict[int, int] = {}

        async def answer(request: Request) -> Outcome:
            self.sent.append(request.body)
            slot = request.body.get("id_slot")
            if slot is not None:
                self.busy[slot] = self.busy.get(slot, 0) + 1
                assert self.busy[slot] <= 2, "more than two requests on one slot"
            await asyncio.sleep(0.001)
            if slot is not None:
                self.busy[slot] -= 1
            return Outcome(value="answer to " + request.body["messages"][-1]["content"][-12:])

        super().__init__(answer, name="chat")

    async def prefix_lanes(self):
        return self.lanes

    def routed(self, body, lane, group):
        return {**body, "id_slot": lane} if lane is not None else {**body, "group": group}


def _requests(rows):
    # The prompt is kept beside the body when a request is built (ai.requests): the scheduler reads it there.
    bodies = [{"messages": [{"role": "user", "content": t}]} for _, t in rows]
    return [Request("chat", body, 10, wire.prompt_text(body)) for body in bodies]


def test_the_runtime_answers_each_row_in_its_place_while_sending_groups_together():
    rows = _interleaved(5, 8)
    provider = _Chat()
    rt = InferenceRuntime(provider, RuntimeConfig(cache_policy="off", max_concurrency=4), model="m")
    results = asyncio.run(rt.run_many(_requests(rows)))
    assert [r.value for r in results] == ["answer to " + t[-12:] for _, t in rows]
    sent_docs = [int(b["messages"][0]["content"].split(":")[0].split()[1]) for b in provider.sent]
    switches = sum(1 for a, b in zip(sent_docs, sent_docs[1:]) if a != b)
    assert switches <= 3 * 5 < 39
    # One routing key per group, the same for all its rows.
    keys = {}
    for d, b in zip(sent_docs, provider.sent):
        keys.setdefault(d, set()).add(b["group"])
    assert all(len(k) == 1 for k in keys.values()) and len({next(iter(k)) for k in keys.values()}) == 5


def test_prefix_order_false_sends_in_arrival_order():
    rows = _interleaved(3, 4)
    provider = _Chat()
    rt = InferenceRuntime(provider, RuntimeConfig(cache_policy="off", max_concurrency=1, prefix_order=False), model="m")
    asyncio.run(rt.run_many(_requests(rows)))
    assert [b["messages"][0]["content"] for b in provider.sent] == [t for _, t in rows]
    assert all("group" not in b for b in provider.sent)


def test_a_server_with_slots_gets_each_group_on_one_slot():
    rows = _interleaved(4, 6)
    provider = _Chat(lanes=2)
    rt = InferenceRuntime(provider, RuntimeConfig(cache_policy="off", max_concurrency=8), model="m")
    results = asyncio.run(rt.run_many(_requests(rows)))
    assert all(r.error is None for r in results)
    slots_of: dict[int, set] = {}
    for b in provider.sent:
        d = int(b["messages"][0]["content"].split(":")[0].split()[1])
        slots_of.setdefault(d, set()).add(b["id_slot"])
    # A free slot helps the last group held by another slot rather than idle: at most one group is split.
    assert sum(len(s) > 1 for s in slots_of.values()) <= 1, slots_of
    assert {s for v in slots_of.values() for s in v} == {0, 1}
    # A slot serves its groups one after another: it never goes back to a group it left.
    for slot in (0, 1):
        seq = [int(b["messages"][0]["content"].split(":")[0].split()[1]) for b in provider.sent if b["id_slot"] == slot]
        runs = [d for k, d in enumerate(seq) if k == 0 or seq[k - 1] != d]
        assert len(runs) == len(set(runs)), seq



class _Counted(str):
    """A prompt text that counts how often it is compared with a group's prefix."""

    compared = 0

    def startswith(self, *args) -> bool:
        _Counted.compared += 1
        return str.startswith(self, *args)


def test_pending_rows_are_compared_with_the_groups_being_sent_once_not_once_per_released_row():
    # A group with a long shared prefix is being sent while 2,000 other rows wait for the next round.
    # Every released row runs the scheduler once; comparing every waiting row each time was
    # quadratic (14% of the client's CPU at 4,096 pending rows in bench/prompt_throughput.py).
    async def run() -> int:
        sched = PrefixScheduler(lanes=1)
        first = [asyncio.ensure_future(sched.turn(DOCS[0] + f"Question {q:04d}?")) for q in range(200)]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        later = [asyncio.ensure_future(sched.turn(_Counted(DOCS[1 + i % 5] + f"Question {i}?"))) for i in range(2000)]
        await asyncio.sleep(0)
        _Counted.compared = 0
        for _ in range(150):  # rows of the first group take their place in flight, one at a time
            await asyncio.sleep(0)
            sched.release(0)
        await asyncio.sleep(0)
        compared = _Counted.compared
        for t in first + later:
            t.cancel()
        return compared

    # Once per change of the groups being sent (two groups here: "Question 00.." and "Question 01.."),
    # not once per released row (604,000 comparisons before: 150 pumps x 2,000 rows x 2 groups).
    assert asyncio.run(run()) <= 4 * 2000


def _slots_used(texts: list[str], lanes: int) -> list[set[int]]:
    """The slots each text went to, through the runtime, on a mock server of ``lanes`` slots."""
    provider = _Chat(lanes=lanes)
    rt = InferenceRuntime(provider, RuntimeConfig(cache_policy="off", max_concurrency=16), model="m")
    results = asyncio.run(rt.run_many(_requests([(0, t) for t in texts])))
    assert all(r.error is None for r in results)
    slots: dict[str, set[int]] = {}
    for b in provider.sent:
        slots.setdefault(b["messages"][-1]["content"], set()).add(b["id_slot"])
    return [slots[t] for t in texts]


def test_rows_whose_long_shared_start_outweighs_the_rest_stay_on_one_slot():
    # Few-shot label scoring: 40 examples (the shared start, read by every slot that serves a row) before
    # a short row. A second slot would read the start again for less work than the start itself.
    shots = "".join(f"Text: example review number {i} with some words\nLabel: positive\n\n" for i in range(40))
    texts = [shots + f"Text: row {i} short\nLabel:" for i in range(8)]
    used = _slots_used(texts, lanes=4)
    assert set().union(*used) == {0}, used


def test_rows_with_much_more_of_their_own_than_the_shared_start_use_every_slot():
    # A short system message before long documents: each slot reads the start once, for far more work.
    system = "You answer questions about the document below, in one sentence, from the document only.\n\n"
    texts = [system + f"Document {d}: " + chr(ord("a") + d) * 2000 for d in range(8)]
    used = _slots_used(texts, lanes=4)
    assert set().union(*used) == {0, 1, 2, 3}, used
