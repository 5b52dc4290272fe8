"""sparklog's own Kafka-protocol client, used by the CLI and the Spark DataSource.

Configs are dicts with Kafka's names (``{"bootstrap.servers": "127.0.0.1:9092"}``). Each
client object runs its network I/O on a private event-loop thread; the methods here are
synchronous.
"""

from sparklog.client.admin import AdminClient, NewTopic, OffsetSpec
from sparklog.client.arrow_fetch import ArrowFetcher, FetchAhead, FetchedRows, FetchRange
from sparklog.client.consumer import Consumer, ConsumerRecord
from sparklog.client.delivery import DeliveryError, ProducerInterceptor, RecordMetadata
from sparklog.client.metadata import PartitionMetadata, TopicMetadata
from sparklog.client.producer import Producer
from sparklog.client.transactions import PreparedTxnState, TransactionStateError
from sparklog.protocol.topic_partition import TopicPartition

__all__ = [
    "AdminClient",
    "ArrowFetcher",
    "Consumer",
    "ConsumerRecord",
    "DeliveryError",
    "FetchAhead",
    "FetchedRows",
    "FetchRange",
    "NewTopic",
    "OffsetSpec",
    "PartitionMetadata",
    "PreparedTxnState",
    "Producer",
    "ProducerInterceptor",
    "RecordMetadata",
    "TopicMetadata",
    "TopicPartition",
    "TransactionStateError",
]
