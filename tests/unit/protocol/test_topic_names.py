"""Topic names: Kafka's legal characters and length."""

from __future__ import annotations

import pytest

from sparklog.protocol.errors import InvalidTopicError
from sparklog.protocol.topic_names import validate_topic_name


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "bad name", "naïve", "a/b", "x:y"])
def test_illegal_topic_names(name):
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)


@pytest.mark.parametrize("name", ["a", "A-b_c.d", "a" * 249, "__consumer_offsets", "0"])
def test_legal_topic_names(name):
    validate_topic_name(name)
