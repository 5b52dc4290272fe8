"""The broker process: asyncio Kafka-protocol server, request dispatch, one handler module
per API family, replica manager, delayed operations and the group coordinator.

Entry points: ``Broker`` (``sparklog.broker.broker``) for embedding, ``sparklog server`` on
the command line, ``sparklog.cluster.EmbeddedCluster`` for tests and laptops. Importing this
package stays cheap: submodules are imported where used."""
