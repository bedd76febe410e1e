"""A small job as a user runs it under ``opentelemetry-instrument`` (tests/test_otel_backend.py): a prompt job and a
semantic join against the simulator at ``argv[1]``. Nothing here configures OpenTelemetry: the ``OTEL_*``
variables and the SDK's auto-configuration do."""

import sys

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt


def main() -> None:
    base_url, key = sys.argv[1], sys.argv[2]
    api = dict(provider="openai", base_url=base_url, api_key=key, model="gpt-5-mini", use_chat_completions=True, cache="off")

    questions = ifr.from_pydict({"q": [f"question {i}" for i in range(6)]})
    print(len(questions.with_column("a", prompt(col("q"), **api)).to_pydict()["a"]))

    reviews = ifr.from_pydict({"review": ["good film", "bad film", "good plot"]})
    same = reviews.sem_join(reviews, "{review:left} and {review:right} express the same sentiment", plan="nested", **api)
    print(len(same.to_pydict()["review"]))


if __name__ == "__main__":  # pytest imports the file for its doctests: nothing runs then
    main()
