"""Apache Kafka's JSON message definitions (clients/src/main/resources/common/message/, as
fetched from github:apache/kafka) of the controller-listener APIs kafka-python does not
ship, so the cross-check builds kafka-python classes from Kafka's own declarations."""
