"""Label scoring on the wire: the requests that give each label's log-probability, and reading them back.

Two ways, by what the server returns:

- llama.cpp (``LlamaCppScorer``): one native ``/completion`` request per label that forces the label's
  own tokens (a grammar of the label, its tokens' logits raised) and reads each token's probability
  *before sampling* (``post_sampling_probs: false``): the model's raw probability of every token of
  the label, so a multi-token label is scored in full. The prompt is raw text, as a base model reads it.
- OpenAI chat completions (``TopLogprobsScorer``): one request with ``max_tokens=1``, ``logprobs``
  and ``top_logprobs=20``; a label's score is the probability of the top tokens that start it
  (case and spaces ignored). Limits: only the first token is scored, so labels should differ in
  their first word; a label absent from the top 20 gets the least listed probability, an upper bound;
  reasoning models (gpt-5, o-series) refuse ``logprobs``.

Example:
    >>> s = LlamaCppScorer(("yes", "no"), ((9259,), (1092,)))
    >>> [r.body["grammar"] for r in s.requests("m", "Answer.", "Q: ok?\\nA:")]
    ['root ::= " yes"', 'root ::= " no"']
    >>> s.label_logprobs([[[9259, -0.5]], [[1092, -2.0]]])
    [-0.5, -2.0]
"""

from __future__ import annotations

import math

from inferframe.providers import openai_format as wire
from inferframe.providers.interface import Request

# A raised logit that makes greedy sampling pick the label's own token among those the grammar allows,
# so the forced path is the label's usual tokenization; the probabilities read are from before it.
_FORCE = 100.0
TOP_LOGPROBS = 20


def raw_prompt(system: str | None, user: str) -> str:
    """The prompt a completion endpoint reads: the instructions, a blank line, then the user's text."""
    return f"{system}\n\n{user}" if system else user


class LlamaCppScorer:
    """Scores labels on a llama.cpp server: one forced completion per label, raw token probabilities.

    Parameters:
        labels: the labels.
        token_ids: each label's tokens (with the leading space it has after "Label:"), from /tokenize.
    """

    endpoint = "completion"

    def __init__(self, labels: tuple, token_ids: tuple) -> None:
        self.labels, self.token_ids = tuple(labels), tuple(tuple(t) for t in token_ids)

    def requests(self, model: str | None, system: str | None, user: str) -> list[Request]:
        """One request per label for the prompt ``system`` + ``user``."""
        prompt = raw_prompt(system, user)
        est = len(prompt) // 4 + 8
        return [Request(self.endpoint, {
            "prompt": prompt, "n_predict": len(ids), "n_probs": 1, "temperature": 0, "post_sampling_probs": False,
            "grammar": "root ::= " + _gbnf_literal(" " + label), "logit_bias": [[i, _FORCE] for i in ids],
        }, est, prompt, len(ids)) for label, ids in zip(self.labels, self.token_ids)]

    def label_logprobs(self, values: list) -> list[float]:
        """Each label's log-probability from the answers of ``requests`` ([[token id, logprob], ...] each).

        Raises:
            ValueError: an answer that did not follow the label's tokens.
        """
        out = []
        for label, ids, tokens in zip(self.labels, self.token_ids, values):
            got = tuple(int(t[0]) for t in tokens)
            if got != ids:
                raise ValueError(f"the server generated tokens {got} for label {label!r}, not its tokens {ids}")
            out.append(float(sum(t[1] for t in tokens)))
        return out


class TopLogprobsScorer:
    """Scores labels on an OpenAI-compatible chat endpoint by the first answer token's top log-probabilities.

    Parameters:
        labels: the labels.

    Example:
        >>> s = TopLogprobsScorer(("positive", "negative"))
        >>> s.requests("gpt-4o-mini", "Classify.", "Text: fine\\nLabel:")[0].body["top_logprobs"]
        20
        >>> [round(x, 2) for x in s.label_logprobs([[["pos", -0.5], ["Positive", -2.0], ["neg", -3.0]]])]
        [-0.3, -3.0]
    """

    endpoint = "chat_logprobs"

    def __init__(self, labels: tuple) -> None:
        self.labels = tuple(labels)

    def requests(self, model: str | None, system: str | None, user: str) -> list[Request]:
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
        body = {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0, "logprobs": True,
                "top_logprobs": TOP_LOGPROBS}
        if model is None:
            body.pop("model")
        text = wire.prompt_text(body)  # the prompt as the server reads it: rows sharing a start go out together
        return [Request(self.endpoint, body, len(raw_prompt(system, user)) // 4 + 8, text, 1)]

    def label_logprobs(self, values: list) -> list[float]:
        """Each label's log-probability: the summed probability of the top tokens that begin it."""
        top = values[0]
        if not top:
            raise ValueError("the server sent no log-probabilities (does the model support logprobs?)")
        floor = min(lp for _, lp in top)
        out = []
        for label in self.labels:
            want = label.strip().lower()
            p = sum(math.exp(lp) for tok, lp in top if (t := tok.strip().lower()) and want.startswith(t))
            out.append(math.log(p) if p > 0 else floor)
        return out


def _gbnf_literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
