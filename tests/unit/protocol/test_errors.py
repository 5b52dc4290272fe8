"""The error table and the exception <-> code mapping the protocol boundary relies on."""

import pytest

from sparklog.protocol import errors as E
from sparklog.protocol.errors import ErrorCode


def test_table_is_contiguous_from_minus_one():
    codes = sorted(int(c) for c in ErrorCode)
    assert codes == list(range(-1, codes[-1] + 1))
    assert codes[-1] >= 127


@pytest.mark.parametrize(
    ("code", "name", "retriable"),
    [
        (-1, "UNKNOWN_SERVER_ERROR", False),
        (0, "NONE", False),
        (1, "OFFSET_OUT_OF_RANGE", False),
        (2, "CORRUPT_MESSAGE", True),
        (3, "UNKNOWN_TOPIC_OR_PARTITION", True),
        (6, "NOT_LEADER_OR_FOLLOWER", True),
        (10, "MESSAGE_TOO_LARGE", False),
        (19, "NOT_ENOUGH_REPLICAS", True),
        (35, "UNSUPPORTED_VERSION", False),
        (42, "INVALID_REQUEST", False),
        (56, "KAFKA_STORAGE_ERROR", True),
        (74, "FENCED_LEADER_EPOCH", True),
        (76, "UNSUPPORTED_COMPRESSION_TYPE", False),
        (87, "INVALID_RECORD", False),
        (100, "UNKNOWN_TOPIC_ID", True),
    ],
)
def test_known_rows(code, name, retriable):
    ec = ErrorCode.for_code(code)
    assert (ec.code, ec.name, ec.retriable) == (code, name, retriable)


def test_unknown_code_maps_to_unknown_server_error():
    assert ErrorCode.for_code(31999) is ErrorCode.UNKNOWN_SERVER_ERROR


def test_names_match_kafka_python_for_shared_codes():
    kerrors = pytest.importorskip("kafka.errors")
    # kafka-python spells a few names differently; codes must agree wherever both know them
    ours = {int(c) for c in ErrorCode}
    theirs = {k for k in kerrors.kafka_errors if k is not None}
    assert theirs <= ours


def test_exception_hierarchy_and_codes():
    for cls in (E.CorruptRecordError, E.InvalidRecordError, E.UnsupportedCompressionError):
        assert issubclass(cls, E.KafkaError) and issubclass(cls, E.SparklogError)
    assert issubclass(E.MalformedFrameError, E.SparklogError)
    assert not issubclass(E.MalformedFrameError, E.KafkaError)
    assert E.CorruptRecordError().error_code is ErrorCode.CORRUPT_MESSAGE
    assert E.RecordTooLargeError.error_code is ErrorCode.MESSAGE_TOO_LARGE
    assert E.RecordBatchTooLargeError.error_code is ErrorCode.RECORD_LIST_TOO_LARGE
    assert E.DuplicateSequenceError.error_code is ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    assert E.InvalidConfigError.error_code is ErrorCode.INVALID_CONFIG
    exc = E.CorruptRecordError("bad crc")
    assert str(exc) == "bad crc" and exc.retriable


def test_error_for_code_round_trip():
    assert isinstance(E.error_for_code(6), E.NotLeaderOrFollowerError)
    generic = E.error_for_code(ErrorCode.SECURITY_DISABLED, "nope")
    assert type(generic) is E.KafkaError and generic.error_code is ErrorCode.SECURITY_DISABLED
    E.raise_for_code(0)
    with pytest.raises(E.OffsetOutOfRangeError):
        E.raise_for_code(1)
