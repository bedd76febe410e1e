"""Multiple-choice questions over images with structured answers: the friction-log workload, in small.

Reads the bundled images and questions, sends each image with its question to
any OpenAI-compatible vision server (vLLM, LM Studio, llama.cpp with a vision
model, OpenAI), gets back a typed ``{answer, confidence}`` struct, and computes
accuracy with the DataFrame.

    python examples/vision_mcq.py --base-url http://localhost:8000/v1 --model google/gemma-3-4b-it
    OPENAI_API_KEY=... python examples/vision_mcq.py --model gpt-5-mini
"""

from __future__ import annotations

import argparse
import os
import pathlib
from typing import Literal

from pydantic import BaseModel, Field

import inferframe as ifr
from inferframe import col
from inferframe.functions import decode_image, download, format, prompt

HERE = pathlib.Path(__file__).parent / "data" / "mcq"


class Answer(BaseModel):
    answer: Literal["A", "B", "C", "D"] = Field(description="the letter of the correct choice")
    confidence: float = Field(description="how sure you are, from 0 to 1")


def run(base_url: str | None, model: str, api_key: str | None = None) -> dict:
    """Run the workload and return accuracy and counts."""
    df = ifr.read_csv(HERE / "questions.csv")
    df = df.with_column("path", format(str(HERE) + "/{}", col("image")))
    df = df.with_column("picture", decode_image(download(col("path")), max_size=512))
    df = df.with_column(
        "result",
        prompt(
            [col("picture"), format("{}\n{}\nAnswer with the letter of the correct choice.", col("question"), col("choices"))],
            Answer,
            system_message="You answer multiple-choice questions about images.",
            provider="openai", base_url=base_url, api_key=api_key, model=model,
            use_chat_completions=True, temperature=0, max_tokens=100,
        ),
    )
    df = df.with_columns({
        "predicted": col("result").struct.get("answer").cast(ifr.DataType.string()),
        "confidence": col("result").struct.get("confidence"),
    })
    df = df.with_column("correct", (col("predicted") == col("answer")).cast(ifr.DataType.int64())).collect()
    df.select("image", "question", "answer", "predicted", "confidence", "result_error").show(12, max_width=40)
    totals = df.agg(
        col("correct").mean().alias("accuracy"), col("correct").count().alias("answered"),
        col("image").count().alias("questions"),
    ).to_pylist()[0]
    failed = df.where(col("result_error").not_null()).count_rows()
    return {**totals, "failed_rows": failed}


def main() -> None:
    p = argparse.ArgumentParser(description="Vision multiple-choice questions with structured answers.")
    p.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"), help="the server's /v1 URL (default: OpenAI)")
    p.add_argument("--model", required=True)
    p.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"))
    args = p.parse_args()
    print(run(args.base_url, args.model, args.api_key))


if __name__ == "__main__":
    main()
