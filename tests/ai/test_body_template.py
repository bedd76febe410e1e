"""Text rows' bodies from a template equal the bodies built one by one through the wire format."""

from __future__ import annotations

import pytest

from inferframe.ai.config import AICallConfig
from inferframe.ai.requests import BodyTemplate, build_body
from inferframe.providers.registry import provider_class
from inferframe.providers.spec import ProviderSpec
from inferframe.runtime.cache import KeyTemplate
from inferframe.runtime.config import RuntimeConfig


@pytest.mark.parametrize("endpoint, system, options, cap", [
    ("chat", None, (), None),
    ("chat", "Be brief.", (("temperature", 0.0),), 5),
    ("responses", "Answer in French.", (), 7),
    ("chat", None, (("extra_body", {"metadata": {"k": "v"}}),), None),
])
def test_a_template_body_is_the_body_built_for_the_row(endpoint, system, options, cap):
    c = AICallConfig(endpoint, ProviderSpec("openai"), "gpt-5-mini", system, options, RuntimeConfig(), 1, "p",
                     max_output_tokens=cap)
    wire = provider_class(c.provider)
    template = BodyTemplate(build_body(c, [KeyTemplate.SLOT], ["text"], None, wire), KeyTemplate.SLOT)
    for text in ["Hi", "a longer row, with \"quotes\" and ünïcode", KeyTemplate.SLOT[1:]]:
        assert template.fill(text) == build_body(c, [text], ["text"], None, wire)
    first, second = template.fill("one"), template.fill("two")
    assert first != second and template.fill("one") == first  # nothing shared is changed by a fill


def test_a_body_without_the_slot_once_is_refused():
    with pytest.raises(ValueError):
        BodyTemplate({"a": "x", "b": "x"}, "x")
    with pytest.raises(ValueError):
        BodyTemplate({"a": "prefix x"}, "x")  # the slot inside a longer string: not a whole value
