"""The classic consumer-group coordinator, with its state in ``__consumer_offsets``.

    coordinator  GroupCoordinator: which groups this broker serves (the offsets partitions it
                 has loaded: ``load_partition``/``unload_partition``), request checks, admin
    membership   the JoinGroup/SyncGroup/Heartbeat/LeaveGroup state machine and rebalances
    offsets      OffsetCommit/OffsetFetch, tombstones, retention
    registry     the groups held, and the operations membership and offsets share
    model        groups, members, states, request results, the clock
    store        GroupStore: records written to and replayed from one offsets partition
    records      the ``__consumer_offsets`` key and value formats (Kafka's)
    config       the broker settings the coordinator reads

The wire handlers are in ``sparklog.broker.handlers.groups``.
"""
