"""Helpers shared by the tests, one module per kind of thing they build or run.

``net`` ports, ``polling`` bounded waits, ``batches`` record batches, ``strategies``
hypothesis records, ``requests`` raw Produce/Fetch requests and ``wire`` the raw connection
that sends them, ``servers`` a ``sparklog server`` child process, ``kafka_clients`` the
third-party clients, ``groups`` consumer-group members driven by them, ``spark`` Spark
sessions and sources, ``messages`` random protocol messages, ``broker`` broker parts driven
in-process (a LogManager-backed ``Logs``, requests through a ``Dispatcher``). Fixtures live in the
``conftest.py`` files, not here.
"""
