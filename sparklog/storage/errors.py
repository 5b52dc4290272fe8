"""Storage-internal exceptions, named for the invariant that broke.

They never cross the wire as themselves: the log turns them into recovery actions (rebuild an
index, truncate a torn tail) or into ``KafkaStorageError`` for the broker.
"""

from __future__ import annotations

from sparklog.protocol.errors import InvalidRecordError, KafkaStorageError, SparklogError

__all__ = ["CorruptIndexError", "OffsetsOutOfOrderError", "SegmentCorruptError", "LogClosedError",
           "UnexpectedAppendOffsetError"]


class CorruptIndexError(SparklogError):
    """An index file fails its sanity check (size, ordering, range); it gets rebuilt."""


class OffsetsOutOfOrderError(SparklogError):
    """A batch's offsets do not follow the log end offset (follower append, recovery)."""


class SegmentCorruptError(KafkaStorageError):
    """A read touched a range of a closed segment that failed validation on recovery."""


class LogClosedError(KafkaStorageError):
    """The log was closed or deleted underneath the caller."""


class UnexpectedAppendOffsetError(InvalidRecordError):
    """A follower append whose first offset is below the log end offset."""
