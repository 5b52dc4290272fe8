"""Our declarations against two independent third-party codecs, byte for byte.

- kafka-python's JSON-driven classes (``kafka.protocol.{producer,consumer,metadata,admin}``)
  cover every API and version we declare, flexible ones included;
- kafka-python's older hand-written per-version structs (``kafka.protocol.old``) and
  aiokafka's (``aiokafka.protocol``) cover the versions of the APIs each ever implemented.

For each declared (API, version, request/response): random message -> our bytes -> their
decode -> their encode must give the same bytes, and our decode of their bytes gives the
original message back.
"""

import importlib
import importlib.util
import pkgutil
import random

import pytest

from sparklog.protocol.messages import API_BY_KEY
from tests.helpers.messages import make_message

kafka_protocol = pytest.importorskip("kafka.protocol.api_message")


def _json_classes():
    out = {}
    for sub in ("producer", "consumer", "metadata", "admin"):
        pkg = importlib.import_module(f"kafka.protocol.{sub}")
        for info in pkgutil.iter_modules(pkg.__path__):
            mod = importlib.import_module(f"kafka.protocol.{sub}.{info.name}")
            for name, obj in vars(mod).items():
                if (isinstance(obj, type) and issubclass(obj, kafka_protocol.ApiMessage)
                        and obj is not kafka_protocol.ApiMessage):
                    out[name] = obj
    return out


def _struct_classes(package: str):
    """{(api_key, version, kind): class} of a hand-written per-version struct library."""
    pkg = importlib.import_module(package)
    api = importlib.import_module(f"{package}.api")
    Request, Response = api.Request, api.Response
    out = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        try:
            mod = importlib.import_module(f"{package}.{info.name}")
        except ImportError:
            continue
        for obj in vars(mod).values():
            if not isinstance(obj, type) or obj in (Request, Response):
                continue
            if not issubclass(obj, Request | Response) or not hasattr(obj, "SCHEMA"):
                continue
            version = getattr(obj, "API_VERSION", None)
            if isinstance(version, int):
                kind = "request" if issubclass(obj, Request) else "response"
                out[(obj.API_KEY, version, kind)] = obj
    return out


def _controller_classes():
    """kafka-python classes for the controller APIs, built from Kafka's JSON files
    (``kafka_json``), which kafka-python does not ship."""
    package = "tests.unit.protocol.kafka_json"
    out = {}
    for name in ("AlterPartition", "BrokerRegistration", "BrokerHeartbeat", "AllocateProducerIds"):
        for kind in ("Request", "Response"):
            out[name + kind] = type(name + kind, (kafka_protocol.ApiMessage,), {},
                                    load_json=package)
    return out


JSON_CLASSES = {**_json_classes(), **_controller_classes()}
OLD_CLASSES = _struct_classes("kafka.protocol.old")
AIOKAFKA_CLASSES = _struct_classes("aiokafka.protocol") if importlib.util.find_spec("aiokafka") else {}

CASES = [
    (spec.key, kind, version)
    for spec in API_BY_KEY.values()
    for version in range(spec.min_version, spec.max_version + 1)
    for kind in ("request", "response")
]
OLD_CASES = [case for case in CASES if (case[0], case[2], case[1]) in OLD_CLASSES]
AIOKAFKA_CASES = [case for case in CASES if (case[0], case[2], case[1]) in AIOKAFKA_CLASSES]


def _sample(key, kind, version, seed):
    ours = getattr(API_BY_KEY[key], kind)
    rng = random.Random(f"{seed}/{key}/{kind}/{version}")
    for _ in range(4):
        msg = make_message(rng, ours, version)
        if key == 18 and kind == "response":
            # kafka-python re-reads an ApiVersions error response as v0 (KIP-511).
            msg.error_code = 0
        yield ours, msg


def test_cross_check_covers_every_declared_api():
    names = {spec.name for spec in API_BY_KEY.values()}
    missing = [n for n in names if n + "Request" not in JSON_CLASSES]
    assert not missing
    assert len(OLD_CASES) > 150
    assert len(AIOKAFKA_CASES) > 50


@pytest.mark.parametrize(("key", "kind", "version"), CASES)
def test_bytes_match_kafka_python_json_codec(key, kind, version):
    spec = API_BY_KEY[key]
    theirs = JSON_CLASSES[spec.name + kind.capitalize()]
    for ours, msg in _sample(key, kind, version, "json"):
        if key == 63 and kind == "request":
            # kafka-python drops a top-level tagged []uuid when decoding (it reads
            # offline_log_dirs back as []); test_tagged_offline_log_dirs_layout covers it
            msg.offline_log_dirs = []
        data = msg.encode(version)
        decoded = theirs.decode(data, version=version)
        decoded._header = None  # decode() bypasses __init__; encode() expects the slot
        again = bytes(decoded.encode(version=version))
        assert again == data, f"{spec.name} {kind} v{version}"
        assert ours.decode(again, version) == msg


@pytest.mark.parametrize(("key", "kind", "version"), OLD_CASES)
def test_bytes_match_kafka_python_handwritten_structs(key, kind, version):
    theirs = OLD_CLASSES[(key, version, kind)]
    for ours, msg in _sample(key, kind, version, "old"):
        data = msg.encode(version)
        again = theirs.decode(data).encode()
        assert again == data, f"{API_BY_KEY[key].name} {kind} v{version} vs {theirs.__name__}"
        assert ours.decode(again, version) == msg


@pytest.mark.parametrize(("key", "kind", "version"), AIOKAFKA_CASES)
def test_bytes_match_aiokafka_structs(key, kind, version):
    theirs = AIOKAFKA_CLASSES[(key, version, kind)]
    for ours, msg in _sample(key, kind, version, "aiokafka"):
        data = msg.encode(version)
        again = theirs.decode(data).encode()
        assert again == data, f"{API_BY_KEY[key].name} {kind} v{version} vs {theirs.__name__}"
        assert ours.decode(again, version) == msg


def test_tagged_offline_log_dirs_layout():
    """BrokerHeartbeat v1's tagged offline_log_dirs as Kafka's JSON lays it out: after the
    fixed fields, a tag section with tag 0, its size, then a compact []uuid."""
    from sparklog.protocol.messages.controller import BrokerHeartbeatRequest

    msg = BrokerHeartbeatRequest(broker_id=1, broker_epoch=5, current_metadata_offset=7,
                                 offline_log_dirs=[b"\x01" * 16])
    data = msg.encode(1)
    fixed = (b"\x00\x00\x00\x01" + (5).to_bytes(8, "big") + (7).to_bytes(8, "big")
             + b"\x00\x00")
    assert data == fixed + b"\x01" + b"\x00" + b"\x11" + b"\x02" + b"\x01" * 16
    assert BrokerHeartbeatRequest.decode(data, 1) == msg
    assert msg.encode(0) == fixed + b"\x00"
