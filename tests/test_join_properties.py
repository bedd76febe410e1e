"""The rules that find the property a join predicate compares (issue 31 item 4): 30 phrasings, each with its
property and comparison, and the predicates that must not split."""

import pytest

from inferframe.ai.join_properties import Split, split_text

SPLITS = [
    # (predicate with fields as {}, property, relation, values)
    ("{} and {} express the same sentiment about the film", "sentiment", "equal", None),
    ("{} and {} express the same sentiment", "sentiment", "equal", None),
    ("{} and {} have the same topic.", "topic", "equal", None),
    ("{} and {} are both positive or both negative", "sentiment", "equal", ("positive", "negative")),
    ("{} and {} are either both true or both false", "truth", "equal", ("true", "false")),
    ("{} has the same author as {}", "author", "equal", None),
    ("{} is written in the same language as {}", "language", "equal", None),
    ("{} mentions the same city as {}", "city", "equal", None),
    ("{} is about the same topic as {}", "topic", "equal", None),
    ("{} and {} are in the same language", "language", "equal", None),
    ("{} and {} share the same genre", "genre", "equal", None),
    ("{} and {} share a topic", "topic", "equal", None),
    ("{} and {} agree on the price range", "price range", "equal", None),
    ("{} and {} agree in tone", "tone", "equal", None),
    ("{} and {} have matching colours", "colour", "equal", None),
    ("{} and {} have identical ratings", "rating", "equal", None),
    ("the sentiment of {} and {} is the same", "sentiment", "equal", None),
    ("{}'s sentiment is the same as {}'s", "sentiment", "equal", None),
    ("{} and {} HAVE THE SAME Overall Sentiment!", "overall sentiment", "equal", None),
    ("{} expresses the opposite sentiment to {}", "sentiment", "opposite", None),
    ("{} and {} have opposite sentiments", "sentiment", "opposite", None),
    ("{} and {} differ in their price range", "price range", "different", None),
    ("{} and {} differ in tone", "tone", "different", None),
    ("{} and {} disagree on the verdict", "verdict", "different", None),
    ("{} and {} are about different products", "product", "different", None),
    ("{} has a different author from {}", "author", "different", None),
    ("{} and {}: one is positive and the other negative", "sentiment", "different", ("positive", "negative")),
    ("{} and {} have different categories", "category", "different", None),
]

NOT_SPLIT = [
    "{} is cheaper than {}",
    "{} and {} agree",
    "{} describes a person who would work at {}",
    "{} is the same person as {}",  # one entity, not a property of each side
    "{} and {} are the same company",
    "{} has the same author as {} and a lower price",  # the rest of the predicate would be lost
    "{} and {} were released at the same time",
    "{} answers the question in {}",
]


@pytest.mark.parametrize("text, prop, relation, values", SPLITS)
def test_a_phrasing_gives_its_property_and_comparison(text, prop, relation, values):
    found = split_text(text)
    assert found is not None, text
    assert (found.property, found.relation, found.values) == (prop, relation, values)


@pytest.mark.parametrize("text", NOT_SPLIT)
def test_a_predicate_that_compares_no_single_property_does_not_split(text):
    assert split_text(text) is None


def test_a_qualifier_narrows_the_property_asked():
    found = split_text("{} and {} express the same sentiment about the plot twist in the end")
    assert found == Split("sentiment", "equal", None, "about the plot twist in the end")
    assert found.asked == "sentiment about the plot twist in the end"


def test_the_list_is_broad():
    assert len(SPLITS) >= 20 and {r for _, _, r, _ in SPLITS} == {"equal", "different", "opposite"}
