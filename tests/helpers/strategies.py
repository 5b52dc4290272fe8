"""Hypothesis strategies for the record codec tests.

``record_st``: one record as a producer may send it: null or binary key and value, up to
three headers (null values allowed), any create-time timestamp up to 2**45 ms.
"""

from __future__ import annotations

from hypothesis import strategies as st

from sparklog.protocol.records import Record

__all__ = ["record_st"]

header_st = st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20))
record_st = st.builds(
    Record,
    key=st.none() | st.binary(max_size=40),
    value=st.none() | st.binary(max_size=300),
    headers=st.lists(header_st, max_size=3),
    timestamp=st.integers(min_value=0, max_value=2**45),
)
