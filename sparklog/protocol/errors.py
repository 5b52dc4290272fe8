"""Kafka error codes and sparklog's typed exceptions.

Inside sparklog, failures travel as exceptions; at the protocol boundary (a response being
encoded) they turn into Kafka error codes. Keeping the table and the exception hierarchy in one
module means the boundary code can map either way without a lookup table of its own:
``exc.error_code`` for exception -> code, and ``error_for_code(code)`` for code -> exception
(what a client does with a broker's response).

The table follows Apache Kafka's protocol guide (generated ``protocol_errors`` page): names,
codes and the "Retriable" column.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """Every error code of Kafka's protocol guide (up to Kafka 4.x)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133

    @property
    def code(self) -> int:
        return int(self)

    @property
    def retriable(self) -> bool:
        """Whether a client may retry the same request (the guide's "Retriable" column)."""
        return self in _RETRIABLE

    @classmethod
    def for_code(cls, code: int) -> ErrorCode:
        """The member for ``code``; codes newer than this table map to UNKNOWN_SERVER_ERROR
        so that a response from a newer broker still decodes."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR


_RETRIABLE = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.LISTENER_NOT_FOUND,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        ErrorCode.ELECTION_NOT_NEEDED,
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
        ErrorCode.THROTTLING_QUOTA_EXCEEDED,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INCONSISTENT_TOPIC_ID,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
        ErrorCode.SHARE_SESSION_NOT_FOUND,
        ErrorCode.INVALID_SHARE_SESSION_EPOCH,
        ErrorCode.SHARE_SESSION_LIMIT_REACHED,
    }
)


# --------------------------------------------------------------------------- exceptions


class SparklogError(Exception):
    """Root of every exception sparklog raises on purpose."""


class MalformedFrameError(SparklogError):
    """A frame or field that cannot be decoded (truncated, negative length, bad varint).

    Not a KafkaError: the peer broke the framing, so the boundary closes the connection
    (or answers INVALID_REQUEST when the request header was readable)."""

    error_code = ErrorCode.INVALID_REQUEST


class KafkaError(SparklogError):
    """An error that has a Kafka error code; the boundary sends ``error_code``."""

    error_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str | None = None) -> None:
        self.message = message
        super().__init__(message if message is not None else self.error_code.name)

    @property
    def retriable(self) -> bool:
        return self.error_code.retriable


class CorruptRecordError(KafkaError):
    """CRC mismatch or a record/batch whose bytes do not parse."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(KafkaError):
    """A batch that parses but breaks a rule (inconsistent header, bad magic, ...)."""

    error_code = ErrorCode.INVALID_RECORD


class RecordTooLargeError(KafkaError):
    error_code = ErrorCode.MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(KafkaError):
    error_code = ErrorCode.RECORD_LIST_TOO_LARGE


class OffsetOutOfRangeError(KafkaError):
    error_code = ErrorCode.OFFSET_OUT_OF_RANGE
    # The partition's bounds, when the response that refused the offset carried them
    # (a Fetch does); None otherwise.
    log_start_offset: int | None = None
    high_watermark: int | None = None


class OffsetMovedToTieredStorageError(KafkaError):
    """A follower fetched below the leader's local log start of a tiered partition: it
    rebuilds its state from the bucket instead (KIP-405)."""

    error_code = ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE


class UnsupportedVersionError(KafkaError):
    error_code = ErrorCode.UNSUPPORTED_VERSION


class UnsupportedCompressionError(KafkaError):
    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class InvalidTopicError(KafkaError):
    error_code = ErrorCode.INVALID_TOPIC_EXCEPTION


class UnknownTopicOrPartitionError(KafkaError):
    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class NotLeaderOrFollowerError(KafkaError):
    error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class OutOfOrderSequenceError(KafkaError):
    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(KafkaError):
    error_code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaError):
    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class UnknownProducerIdError(KafkaError):
    error_code = ErrorCode.UNKNOWN_PRODUCER_ID


class InvalidTimestampError(KafkaError):
    error_code = ErrorCode.INVALID_TIMESTAMP


class KafkaStorageError(KafkaError):
    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class FencedLeaderEpochError(KafkaError):
    error_code = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpochError(KafkaError):
    error_code = ErrorCode.UNKNOWN_LEADER_EPOCH


class InvalidRequestError(KafkaError):
    error_code = ErrorCode.INVALID_REQUEST


class PolicyViolationError(KafkaError):
    error_code = ErrorCode.POLICY_VIOLATION


class InvalidConfigError(KafkaError):
    error_code = ErrorCode.INVALID_CONFIG


class InvalidPartitionsError(KafkaError):
    error_code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(KafkaError):
    error_code = ErrorCode.INVALID_REPLICATION_FACTOR


class TopicAlreadyExistsError(KafkaError):
    error_code = ErrorCode.TOPIC_ALREADY_EXISTS


class LeaderNotAvailableError(KafkaError):
    error_code = ErrorCode.LEADER_NOT_AVAILABLE


class RequestTimedOutError(KafkaError):
    error_code = ErrorCode.REQUEST_TIMED_OUT


class NotEnoughReplicasError(KafkaError):
    error_code = ErrorCode.NOT_ENOUGH_REPLICAS


class NotEnoughReplicasAfterAppendError(KafkaError):
    error_code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


class InvalidRequiredAcksError(KafkaError):
    error_code = ErrorCode.INVALID_REQUIRED_ACKS


class NotControllerError(KafkaError):
    error_code = ErrorCode.NOT_CONTROLLER


class StaleControllerEpochError(KafkaError):
    error_code = ErrorCode.STALE_CONTROLLER_EPOCH


class CoordinatorNotAvailableError(KafkaError):
    error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE


class CoordinatorLoadInProgressError(KafkaError):
    error_code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


class NotCoordinatorError(KafkaError):
    error_code = ErrorCode.NOT_COORDINATOR


class IllegalGenerationError(KafkaError):
    error_code = ErrorCode.ILLEGAL_GENERATION


class UnknownMemberIdError(KafkaError):
    error_code = ErrorCode.UNKNOWN_MEMBER_ID


class RebalanceInProgressError(KafkaError):
    error_code = ErrorCode.REBALANCE_IN_PROGRESS


class InvalidGroupIdError(KafkaError):
    error_code = ErrorCode.INVALID_GROUP_ID


class GroupIdNotFoundError(KafkaError):
    error_code = ErrorCode.GROUP_ID_NOT_FOUND


class NonEmptyGroupError(KafkaError):
    error_code = ErrorCode.NON_EMPTY_GROUP


class InvalidTxnStateError(KafkaError):
    error_code = ErrorCode.INVALID_TXN_STATE


class InvalidProducerIdMappingError(KafkaError):
    error_code = ErrorCode.INVALID_PRODUCER_ID_MAPPING


class ConcurrentTransactionsError(KafkaError):
    error_code = ErrorCode.CONCURRENT_TRANSACTIONS


class ProducerFencedError(KafkaError):
    error_code = ErrorCode.PRODUCER_FENCED


class TransactionCoordinatorFencedError(KafkaError):
    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class UnknownTopicIdError(KafkaError):
    error_code = ErrorCode.UNKNOWN_TOPIC_ID


class OffsetNotAvailableError(KafkaError):
    error_code = ErrorCode.OFFSET_NOT_AVAILABLE


class InvalidFetchSizeError(KafkaError):
    error_code = ErrorCode.INVALID_FETCH_SIZE


class InvalidReplicaAssignmentError(KafkaError):
    error_code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class StaleBrokerEpochError(KafkaError):
    """A broker spoke to the controller with a broker epoch from an earlier registration."""

    error_code = ErrorCode.STALE_BROKER_EPOCH


class InvalidUpdateVersionError(KafkaError):
    """AlterPartition carried a partition epoch the controller has moved past."""

    error_code = ErrorCode.INVALID_UPDATE_VERSION


class IneligibleReplicaError(KafkaError):
    """AlterPartition asked for an ISR member the controller cannot accept (not a replica,
    not live)."""

    error_code = ErrorCode.INELIGIBLE_REPLICA


def _collect() -> dict[ErrorCode, type[KafkaError]]:
    table: dict[ErrorCode, type[KafkaError]] = {}
    stack = list(KafkaError.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        # first definition wins; subclasses of a specific error do not replace it
        table.setdefault(cls.error_code, cls)
    return table


_BY_CODE = _collect()


def error_for_code(code: int | ErrorCode, message: str | None = None) -> KafkaError:
    """An exception instance for a code from a response (client side).

    Codes without a dedicated class get a plain KafkaError whose ``error_code`` is set on the
    instance (codes unknown to this table become UNKNOWN_SERVER_ERROR)."""
    ec = ErrorCode.for_code(int(code))
    cls = _BY_CODE.get(ec)
    if cls is not None:
        return cls(message)
    exc = KafkaError(message if message is not None else ec.name)
    exc.error_code = ec
    return exc


def raise_for_code(code: int | ErrorCode, message: str | None = None) -> None:
    """Raise the matching exception unless ``code`` is NONE."""
    if code != 0:
        raise error_for_code(code, message)
