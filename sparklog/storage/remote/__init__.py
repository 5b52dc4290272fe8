"""The object-storage tier (Kafka's KIP-405 over fsspec): sealed segments of topics with
``remote.storage.enable`` are uploaded to a bucket, local copies go after
``local.retention.*``, and reads below the local log start are served from the bucket.

Modules: ``store`` (the fsspec filesystem, the object layout, retries), ``manifest`` (which
uploaded segments are complete), ``conditional`` (compare-and-swap of the manifest),
``chunk_cache`` (recently read ranges), ``remote_log`` (one partition's uploads and reads),
``manager`` (the broker's task: upload, retention, restore, bucket clean-up), ``follower``
(where a follower below its leader's local log start continues). The log itself (``PartitionLog.attach_remote``) only routes reads and keeps
its log start covering the remote segments.

Guarantees: a segment is listed in its partition's manifest only after all its objects are
whole in the store, and only listed segments are read; a leader whose epoch is below the
manifest's writes nothing; a local segment is deleted only once listed.
"""
