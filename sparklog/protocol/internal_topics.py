"""Names of Kafka's internal topics, for every layer that must recognise them.

The broker's coordinators write them, the controller marks them internal (clients may not
produce to or delete them), and tools list or hide them. Kafka's names, so that Kafka
tools and clients treat them the same way.
"""

from __future__ import annotations

__all__ = ["CONSUMER_OFFSETS", "TRANSACTION_STATE", "INTERNAL_TOPICS"]

# committed offsets and group metadata (compacted), written by the group coordinator
CONSUMER_OFFSETS = "__consumer_offsets"
# transactional ids' state (compacted), written by the transaction coordinator
TRANSACTION_STATE = "__transaction_state"

INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS, TRANSACTION_STATE})
