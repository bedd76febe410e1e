"""What a sent text row costs before it leaves: its body, its prompt text for the prefix scheduler and its token estimate.

Before issue 32 item 3 the body was built, then the runtime pulled the prompt text back out of it
(``openai_format.prompt_text``) and the limiter's estimate read it again with max_tokens under four
names (``openai_format.estimate_tokens``). Now the request keeps the prompt and its bound beside the
body (``ai.requests.TextRequests``: the prompt from one template split at the row's place), and the
estimate reads those fields. Both paths run here, in one process, on the same rows.

    .venv/bin/python bench/request_fields.py            # 20,000 rows, a 1,500-character system message
    .venv/bin/python bench/request_fields.py --rows 5000 --system-chars 200
"""

from __future__ import annotations

import argparse
import os
import time

from inferframe.ai.config import AICallConfig
from inferframe.ai.requests import BodyTemplate, TextRequests, build_body
from inferframe.providers import openai_format as wire
from inferframe.providers.spec import ProviderSpec
from inferframe.runtime.config import RuntimeConfig

SLOT = "\x00@row"


def before(config: AICallConfig, texts: list[str]) -> int:
    """The old path: body from the template, then the prompt and the estimate read back out of the body."""
    template = BodyTemplate(build_body(config, [SLOT], ["text"], None, config.provider.wire_format()), SLOT)
    total = 0
    for t in texts:
        body = template.fill(t)
        wire.prompt_text(body)  # the prefix scheduler's read
        i, o = wire.estimate_tokens(body, config.model)  # the limiter's read (max_tokens under four names)
        total += i + o
    return total


def after(config: AICallConfig, texts: list[str]) -> int:
    """The new path: the request keeps its prompt and bound; the scheduler and the estimate read the fields."""
    template = TextRequests(config, config.provider.wire_format(), SLOT)
    total = 0
    for t in texts:
        r = template.request(t)
        r.prompt  # noqa: B018 - the prefix scheduler's read
        total += r.est_tokens
    return total


def best_of(fn, config, texts, repeats: int) -> tuple[float, int]:
    times, total = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        total = fn(config, texts)
        times.append(time.perf_counter() - t0)
    return min(times), total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--system-chars", type=int, default=1_500)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.2f} rows={args.rows} system_chars={args.system_chars}")
    system = ("Answer in one word. " * (args.system_chars // 20 + 1))[: args.system_chars]
    texts = [f"Question {i}: is item {i * 7 % 1000} in stock?" for i in range(args.rows)]
    print(f"{'model':<14}{'before rows/s':>16}{'after rows/s':>16}{'ratio':>8}{'tokens before':>16}{'tokens after':>15}")
    for model in ("local-model", "gpt-4o-mini"):
        config = AICallConfig("chat", ProviderSpec("lm_studio"), model, system, (("max_tokens", 64),),
                              RuntimeConfig(), 1, "p")
        tb, nb = best_of(before, config, texts, args.repeats)
        ta, na = best_of(after, config, texts, args.repeats)
        print(f"{model:<14}{args.rows / tb:>16,.0f}{args.rows / ta:>16,.0f}{tb / ta:>8.2f}{nb:>16,}{na:>15,}")


if __name__ == "__main__":
    main()
