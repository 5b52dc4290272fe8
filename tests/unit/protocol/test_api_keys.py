"""ApiKey names exactly the APIs the message registry declares, by Kafka's names."""

import re

from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.messages import API_BY_KEY


def _upper_snake(camel: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", camel).upper()


def test_every_declared_api_has_its_key_by_name():
    assert {k.value: k.name for k in ApiKey} == {
        key: _upper_snake(spec.name) for key, spec in API_BY_KEY.items()}


def test_a_key_is_its_number():
    # handlers are registered under ApiKey members and looked up by the frame's int
    assert ApiKey.API_VERSIONS == 18 and f"{ApiKey.FETCH:d}" == "1"
    assert {ApiKey.METADATA: "m"}[3] == "m"
