"""The corpus's stand-in for the OpenAI service: deterministic answers read off the text each request sends.

A text with "great" or "love" is positive, one with "broke" or "awful" negative, anything else (the
"weird" review) gets an answer outside the labels asked for, so that row fails and is NULL. It reads
the whole request body, so the Chat Completions and Responses shapes are answered alike.
"""

from __future__ import annotations

import json
import re


def _enum(node):
    if isinstance(node, dict):
        if isinstance(node.get("enum"), list):
            return node["enum"]
        node = list(node.values())
    if isinstance(node, list):
        for item in node:
            found = _enum(item)
            if found is not None:
                return found
    return None


def _text(body: dict) -> str:
    """The last message the request sends (chat ``messages`` or responses ``input``)."""
    messages = body.get("messages") or body.get("input") or ""
    last = messages[-1] if isinstance(messages, list) and messages else messages
    content = last.get("content", "") if isinstance(last, dict) else last
    if isinstance(content, list):
        content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def _mood(text: str) -> str | None:
    """The review's mood: only the text after "Text:" or the whole text when it has none."""
    review = text.rsplit("Text:", 1)[-1].lower()
    if "great" in review or "love" in review:
        return "positive"
    if "broke" in review or "awful" in review:
        return "negative"
    return None


def _matches(text: str) -> str:
    """A semantic join's batch: the candidates that share a word of five letters or more with the statement."""
    statement, _, listed = text.partition("Candidates:")
    words = set(re.findall(r"[a-z]{5,}", statement.lower()))
    found = [int(m.group(1)) for m in re.finditer(r"^(\d+)\. (.*)$", listed, re.M)
             if words & set(re.findall(r"[a-z]{5,}", m.group(2).lower()))]
    return json.dumps({"matches": found})


def respond(body: dict) -> str:
    """The simulator's ``responder``."""
    text = _text(body)
    if '"matches"' in json.dumps(body):
        return _matches(text)
    labels = _enum(body)
    if "Texts:" in text:  # an AI aggregate: how many texts the group's prompt lists
        listed = text.rsplit("Texts:", 1)[1].split("\nTask:")[0]
        return f"{sum(1 for line in listed.splitlines() if line[:1].isdigit())} texts"
    mood = _mood(text)
    if labels is None:
        words = re.findall(r"[a-z]+", text.rsplit("Text:", 1)[-1].lower())
        return "answer: " + " ".join(words[-3:])
    if labels == ["yes", "no"]:
        answer = "maybe" if mood is None else "yes" if mood == "positive" else "no"
    elif labels == [str(i) for i in range(1, 6)]:
        answer = "3" if mood is None else "5" if mood == "positive" else "1"
    else:
        answer = "unsure" if mood is None else mood if mood in labels else labels[-1]
    key = next(iter(json.loads(json.dumps(_schema_keys(body)))), "label")
    return json.dumps({key: answer})


def _schema_keys(body: dict) -> list[str]:
    """The property the structured answer is asked under ("label" or "value")."""
    found = re.findall(r'"properties": \{"(\w+)": \{[^{}]*"enum"', json.dumps(body))
    return found or ["label"]
