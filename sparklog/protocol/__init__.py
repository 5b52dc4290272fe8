"""Kafka wire protocol: pure functions over bytes, no I/O.

Kept import-light on purpose: submodules (records, compression, record_arrow) are imported
explicitly by callers so that importing the package never pulls numpy/pyarrow/cramjam.
"""
