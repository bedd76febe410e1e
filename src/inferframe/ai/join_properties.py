"""Find the property a join predicate compares ("express the same sentiment", "both positive or both negative").

A predicate that compares one property of each side ("{a:left} and {a:right} have the same author")
splits: each row's property is asked once, then a hash join on it (sem_join's projection plan). This
module reads such predicates by rules over their literal text (fields written ``{}``) and returns what
they compare: the property, the relation ("equal", "different", "opposite") and, where the phrase names
them ("both positive or both negative"), the property's values.

The phrase must end the predicate (an "as {}"/"to {}" naming the other side, or a qualifier such as
"about the film", may follow it), so "the same author and a lower price" is not split: the rest of the
predicate would be lost. "is/are the same <noun>" asks whether two rows are one entity, not whether a
property agrees, and is not split.

Example:
    >>> split_text("{} and {} express the same sentiment about the film")
    Split(property='sentiment', relation='equal', values=None, qualifier='about the film')
    >>> split_text("{} and {} are both positive or both negative")
    Split(property='sentiment', relation='equal', values=('positive', 'negative'), qualifier=None)
    >>> split_text("{} is cheaper than {}") is None
    True
"""

from __future__ import annotations

from types import MappingProxyType
import dataclasses
import re

RELATIONS = ("equal", "different", "opposite")

# Words that end a property's name: what follows is the other side ("as {}") or a qualifier.
_STOP = r"(?:as|about|to|from|than|with|of|in|on|for|regarding|towards?|toward|and|or|but|at|by|is|are|each)"
_PROP = rf"(?P<prop>[a-z][a-z'-]*(?:\s+(?!{_STOP}\b)[a-z][a-z'-]*){{0,2}})"
_QUAL = r"(?:\s+(?P<qual>(?:about|regarding|towards?|toward|on|for|of|in)\s+[^{}]*?))?"
# The other side may be named after the phrase: "... the same author as {}", "... opposite to {}'s".
_OTHER = r"(?:\s+(?:as|to|from|than|with)\s+(?:that\s+of\s+|those\s+of\s+)?\{\}(?:'s)?(?:\s+(?:does|has|is|do))?)?"
_END = _QUAL + _OTHER + r"\s*[.!?]?\s*$"
_THEIR = r"(?:(?:their|the|its|a|an)\s+)?"

# (pattern, relation); the first that matches wins. Patterns read the lower-cased text.
# "their sentiment is the same", "the tone of {} and {} is different", "{}'s author is the same as {}'s"
_SUBJECT = r"(?:\b(?:their|the)|\{\}'s)\s+" + _PROP + r"\s+(?:of\s+\{\}\s+and\s+(?:that\s+of\s+)?\{\}\s+)?(?:is|are)\s+"
_RULES: tuple[tuple[re.Pattern, str], ...] = tuple((re.compile(p), r) for p, r in (
    (_SUBJECT + r"(?:the\s+same|identical|equal|alike)" + _END, "equal"),
    (_SUBJECT + r"(?:different|not\s+the\s+same)" + _END, "different"),
    (_SUBJECT + r"opposite" + _END, "opposite"),
    (r"\b(?:the\s+|a\s+)?same\s+" + _PROP + _END, "equal"),
    (r"\b(?:identical|matching|equal|common)\s+" + _PROP + _END, "equal"),
    (r"\b(?:agree|agrees|match|matches|coincide|coincides)\s+(?:in|on|about|with\s+respect\s+to)\s+" + _THEIR + _PROP
     + _END, "equal"),
    (r"\b(?:share|shares)\s+(?:a|an|one|the|their)\s+" + _PROP + _END, "equal"),
    (r"\b(?:the\s+|an?\s+)?opposite\s+" + _PROP + _END, "opposite"),
    (r"\b(?:differ|differs|disagree|disagrees|vary|varies)\s+(?:in|on|about|with\s+respect\s+to)\s+" + _THEIR + _PROP
     + _END, "different"),
    (r"\b(?:a\s+|an\s+)?(?:different|distinct|other)\s+" + _PROP + _END, "different"),
))
# "both positive or both negative", "either both true or both false"
_BOTH = re.compile(r"\bboth\s+(?P<a>[a-z][a-z-]*)\s*,?\s+or\s+(?:are\s+)?both\s+(?P<b>[a-z][a-z-]*)\s*[.!?]?\s*$")
# "one is positive and the other negative", "one of them is formal and the other informal"
_ONE_OTHER = re.compile(r"\bone(?:\s+of\s+them)?\s+is\s+(?P<a>[a-z][a-z-]*)\s+and\s+the\s+other\s+(?:one\s+)?(?:is\s+)?"
                        r"(?P<b>[a-z][a-z-]*)\s*[.!?]?\s*$")
# "is the same company as", "are the same person": one entity, not a property (entity matching, not a split).
_IDENTITY = re.compile(r"\b(?:is|are|be|were|was)\s+$")
# Properties named by two values: the name each pair of values is the property of.
_VALUE_NAMES = MappingProxyType({frozenset({"positive", "negative"}): "sentiment", frozenset({"true", "false"}): "truth",
                frozenset({"formal", "informal"}): "formality", frozenset({"male", "female"}): "gender",
                frozenset({"fiction", "non-fiction"}): "genre", frozenset({"old", "new"}): "age",
                frozenset({"spam", "ham"}): "spam or ham"})
# Nouns after "same" that name no property: "in the same way", "at the same time".
_NOT_PROPERTIES = frozenset({"way", "time", "thing", "things", "one", "ones", "kind", "sort", "manner"})


@dataclasses.dataclass(frozen=True)
class Split:
    """What a predicate compares: ``property`` of each side, by ``relation``; ``values`` where the phrase named them.

    ``qualifier`` narrows the property ("about the film"): the property question includes it.
    """

    property: str
    relation: str
    values: tuple[str, ...] | None = None
    qualifier: str | None = None

    @property
    def asked(self) -> str:
        """The property as one row is asked about it: "sentiment about the film".

        Example:
            >>> Split("sentiment", "equal", qualifier="about the film").asked
            'sentiment about the film'
        """
        return self.property if not self.qualifier else f"{self.property} {self.qualifier}"


def split_text(text: str) -> Split | None:
    """The property that ``text`` (a predicate, its fields written ``{}``) compares, or None where no rule matches.

    Parameters:
        text: the predicate's literal text with each field as ``{}``, e.g. ``"{} and {} agree on price"``.

    Example:
        >>> split_text("{} has the same author as {}")
        Split(property='author', relation='equal', values=None, qualifier=None)
        >>> split_text("{} and {} have opposite sentiments").relation
        'opposite'
        >>> split_text("{} is the same person as {}") is None
        True
    """
    s = " ".join(text.lower().replace("’", "'").split())
    for pattern, relation in ((_BOTH, "equal"), (_ONE_OTHER, "different")):
        m = pattern.search(s)
        if m and "{}" not in s[m.start():] and m.group("a") != m.group("b"):
            values = (m.group("a"), m.group("b"))
            name = _VALUE_NAMES.get(frozenset(values), f"{values[0]} or {values[1]}")
            return Split(name, relation, values)
    for pattern, relation in _RULES:
        m = pattern.search(s)
        if m is None:
            continue
        prop = m.group("prop").strip()
        if prop.split()[0] in _NOT_PROPERTIES or "{}" in prop:
            continue
        if relation == "equal" and s[m.start():].startswith(("the same", "same")) and _IDENTITY.search(s[:m.start()]):
            return None
        qual = m.groupdict().get("qual")
        return Split(_singular(prop), relation, None, qual.strip() if qual else None)
    return None


def _singular(prop: str) -> str:
    """ "sentiments" -> "sentiment" (a plural after "different"/"opposite" names one property of each side)."""
    words = prop.split()
    last = words[-1]
    if len(last) > 3 and last.endswith("s") and not last.endswith(("ss", "us", "is")):
        words[-1] = last[:-3] + "y" if last.endswith("ies") else last[:-1]
    return " ".join(words)
