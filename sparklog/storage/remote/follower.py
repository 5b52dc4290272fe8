"""Where a follower below its leader's local log start continues on a tiered partition
(KIP-405's follower path).

The leader answers such a fetch with OFFSET_MOVED_TO_TIERED_STORAGE: the offsets asked for
are only in the bucket, and copying them back through the leader would refill the
follower's disk with what the tier already holds. The follower instead starts its log where
the uploaded segment holding the offset before the leader's local log start ends (an offset
the leader holds locally), and takes from that segment what the skipped bytes would have
built: the leader epochs up to there (the manifest's entry) and the producer state there
(the snapshot uploaded with it). Its log start stays the bucket's, so reads below its local
start go to the bucket, as on the leader.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..producer_state import SNAPSHOT_SUFFIX
from .remote_log import RemoteLog

__all__ = ["TierStart", "tier_start"]


@dataclass(frozen=True, slots=True)
class TierStart:
    """How a follower's log restarts from the bucket."""

    offset: int  # its new (empty) local log starts here: an uploaded segment's end
    log_start_offset: int  # the bucket's
    epochs: list[tuple[int, int]]  # (leader epoch, start offset) before ``offset``
    producer_snapshot: bytes | None  # the producer state at ``offset``, as uploaded


def tier_start(remote: RemoteLog, leader_local_start: int) -> TierStart | None:
    """Where to restart below a leader whose local log starts at ``leader_local_start``;
    None when the manifest (read now) lists no segment holding the offset before it (the
    leader's upload is not visible yet: ask again later). Raises RemoteStorageError when
    the store cannot be read."""
    m = remote.load_manifest()
    seg = m.segment_for(leader_local_start - 1)
    if seg is None:
        return None
    snapshot = remote.store.get_bytes(remote.object_path(seg, SNAPSHOT_SUFFIX))
    return TierStart(seg.end_offset, m.log_start_offset, list(seg.leader_epochs), snapshot)
