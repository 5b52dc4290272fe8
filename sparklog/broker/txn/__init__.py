"""The transaction coordinator (KIP-98), with its state in ``__transaction_state``.

    coordinator  TransactionCoordinator: which transactional ids this broker serves (the
                 state partitions it leads: ``serve_partitions``), InitProducerId,
                 AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, the KIP-890 check
                 (``verify_partitions``), timeouts, id expiry, Describe/ListTransactions
    model        TxnMetadata: one transactional id's producer, epoch, state and partitions
    store        TxnStore: records written to and replayed from one state partition
    records      the ``__transaction_state`` key and value formats (Kafka's)
    markers      MarkerWriter: COMMIT/ABORT control batches into the partitions' logs
    marker_channel  MarkerChannel: each marker to its partition's leader (WriteTxnMarkers
                 to the other brokers, batched per destination)
    verification TxnVerifier: KIP-890 checks of a leader or group coordinator, asked of
                 the id's coordinator
    config       the broker settings the coordinator reads

The wire handlers are in ``sparklog.broker.handlers.transactions``.
"""
