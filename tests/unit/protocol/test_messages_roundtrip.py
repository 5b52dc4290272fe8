"""Every declared version of every API: encode -> decode -> encode is byte-identical."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparklog.protocol.errors import MalformedFrameError
from sparklog.protocol.messages import API_BY_KEY
from tests.helpers.messages import make_message

CASES = [
    (spec.name, kind, version)
    for spec in API_BY_KEY.values()
    for version in range(spec.min_version, spec.max_version + 1)
    for kind in ("request", "response")
]


def _cls(name, kind):
    spec = next(s for s in API_BY_KEY.values() if s.name == name)
    return getattr(spec, kind)


@pytest.mark.parametrize(("name", "kind", "version"), CASES)
def test_round_trip_every_version(name, kind, version):
    cls = _cls(name, kind)
    rng = random.Random(f"{name}/{kind}/{version}")
    for _ in range(6):
        msg = make_message(rng, cls, version)
        data = msg.encode(version)
        back = cls.decode(data, version)
        assert back == msg, f"{name} {kind} v{version}: {back!r} != {msg!r}"
        assert back.encode(version) == data
        # Decoding tolerates trailing bytes (some clients send them).
        assert cls.decode(data + b"\x00\x01\x02", version) == msg


@pytest.mark.parametrize(("name", "kind", "version"), CASES)
def test_truncation_raises_malformed_only(name, kind, version):
    cls = _cls(name, kind)
    rng = random.Random(f"trunc/{name}/{kind}/{version}")
    msg = make_message(rng, cls, version)
    data = msg.encode(version)
    for cut in range(len(data)):
        with pytest.raises(MalformedFrameError):
            cls.decode(data[:cut], version)


def test_default_instances_encode_in_every_version():
    for spec in API_BY_KEY.values():
        for version in range(spec.min_version, spec.max_version + 1):
            for cls in (spec.request, spec.response):
                data = cls().encode(version)
                assert cls.decode(data, version) == cls()


@pytest.mark.parametrize("key", sorted(API_BY_KEY))
def test_mutated_frames_raise_only_malformed(key):
    """Flip random bytes of valid bodies: decoding either succeeds or raises the typed error."""
    spec = API_BY_KEY[key]
    rng = random.Random(f"mutate/{key}")
    for version in range(spec.min_version, spec.max_version + 1):
        for cls in (spec.request, spec.response):
            data = bytearray(make_message(rng, cls, version).encode(version))
            if not data:
                continue
            for _ in range(40):
                mutated = bytearray(data)
                for _ in range(rng.randint(1, 3)):
                    mutated[rng.randrange(len(mutated))] = rng.randrange(256)
                try:
                    cls.decode(bytes(mutated), version)
                except MalformedFrameError:
                    pass


@pytest.mark.parametrize("key", sorted(API_BY_KEY))
@settings(max_examples=25, deadline=None)
@given(rnd=st.randoms(use_true_random=False), data=st.data())
def test_round_trip_property(key, rnd, data):
    spec = API_BY_KEY[key]
    version = data.draw(st.integers(spec.min_version, spec.max_version), label="version")
    cls = data.draw(st.sampled_from([spec.request, spec.response]), label="kind")
    msg = make_message(rnd, cls, version)
    encoded = msg.encode(version)
    assert cls.decode(encoded, version) == msg
    assert cls.decode(encoded, version).encode(version) == encoded
