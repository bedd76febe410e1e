"""What the sem_join tests share: the simulator options and the joined pairs (their responders differ)."""


def opts(sim, **kw):
    """sem_join's options against the simulator ``sim``: gpt-5-mini over chat completions."""
    return dict(provider="openai", base_url=sim.base_url, api_key="sk-sem", model="gpt-5-mini",
                use_chat_completions=True, **kw)


def pairs(df) -> set:
    """The (left review, right review) pairs of a join's result."""
    out = df.to_pydict()
    return set(zip(out["review"], out["right.review"]))
