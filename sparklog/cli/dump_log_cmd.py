"""``sparklog dump-log FILE``: print a segment's batches (kafka-dump-log.sh).

Reads the file directly (no broker): one line per batch with offsets, producer fields, CRC
validity; ``--print-data`` adds one ``|`` line per record with its payload (a control
batch's record shows its ``endTxnMarker``). Also understands ``.index``, ``.timeindex`` and
``.txnindex`` files: one line per entry, then how many there are (an active segment's
index is often empty).
"""

from __future__ import annotations

import argparse
import os
import struct
from collections.abc import Callable
from typing import Any

from sparklog.cli.arguments import add_flags
from sparklog.cli.client_common import add_verbose
from sparklog.cli.errors import CliError, wrap

__all__ = ["add_parser", "dump"]

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_INDEX_ENTRY = struct.Struct(">II")  # relative offset, position in the .log
_TIME_INDEX_ENTRY = struct.Struct(">qI")  # max timestamp, relative offset


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("dump-log", help="print the batches of a segment file",
                              description="Dump a .log/.index/.timeindex/.txnindex file (like "
                                          "kafka-dump-log.sh).")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="segment files: NNN.log, NNN.index, NNN.timeindex or NNN.txnindex")
    add_flags(p, {
        "--print-data": "print every record and its payload",
        "--deep-iteration": "print every record",
    })
    add_verbose(p)
    p.set_defaults(func=wrap(_run))
    return p


def _run(args: argparse.Namespace) -> int:
    rc = 0
    for path in args.files:
        if not os.path.isfile(path):
            raise CliError(f"{path}: no such file")
        print(f"Dumping {path}")
        rc |= dump(path, deep=args.deep_iteration or args.print_data, data=args.print_data)
    return rc


def _base_offset(path: str) -> int:
    stem = os.path.basename(path).split(".")[0]
    try:
        return int(stem)
    except ValueError:
        return 0


def _show(b: bytes | None) -> str:
    if b is None:
        return "null"
    return b.decode("utf-8", errors="replace")


def dump(path: str, *, deep: bool, data: bool) -> int:
    if path.endswith(".index"):
        return _dump_entries(path, _INDEX_ENTRY,
                             lambda base, rel, pos: f"offset: {base + rel} position: {pos}",
                             "Index")
    if path.endswith(".timeindex"):
        return _dump_entries(path, _TIME_INDEX_ENTRY,
                             lambda base, ts, rel: f"timestamp: {ts} offset: {base + rel}",
                             "Time index")
    if path.endswith(".txnindex"):
        return _dump_txn_index(path)
    from sparklog.protocol.batch_header import BatchView
    from sparklog.protocol.errors import SparklogError
    from sparklog.protocol.records import decode_batch

    with open(path, "rb") as fh:
        buf = fh.read()
    print(f"Log starting offset: {_base_offset(path)}")
    pos, rc = 0, 0
    while pos < len(buf):
        if len(buf) - pos < 61:
            print(f"Found {len(buf) - pos} invalid bytes at the end of {os.path.basename(path)}")
            return 1
        try:
            v = BatchView(buf, pos)
        except SparklogError as e:
            print(f"Found invalid batch at position {pos}: {e}")
            return 1
        valid = v.is_valid()
        if not valid:
            rc = 1
        horizon = f"OptionalLong[{v.base_timestamp}]" if v.has_delete_horizon \
            else "OptionalLong.empty"
        ts_kind = "LogAppendTime" if v.timestamp_type == 1 else "CreateTime"
        print(f"baseOffset: {v.base_offset} lastOffset: {v.last_offset} count: {v.record_count} "
              f"baseSequence: {v.base_sequence} lastSequence: {v.last_sequence} "
              f"producerId: {v.producer_id} producerEpoch: {v.producer_epoch} "
              f"partitionLeaderEpoch: {v.partition_leader_epoch} "
              f"isTransactional: {str(v.is_transactional).lower()} "
              f"isControl: {str(v.is_control).lower()} deleteHorizonMs: {horizon} "
              f"position: {pos} {ts_kind}: {v.max_timestamp} size: {v.size} magic: {v.magic} "
              f"compresscodec: {_CODECS.get(v.compression, v.compression)} crc: {v.crc} "
              f"isvalid: {str(valid).lower()}")
        if deep and valid:
            try:
                batch = decode_batch(buf, pos)
            except SparklogError as e:
                print(f"| cannot decode records: {e}")
                rc = 1
            else:
                for i, r in enumerate(batch.records):
                    seq = -1 if v.base_sequence < 0 else v.base_sequence + i
                    line = (f"| offset: {r.offset} {ts_kind}: {r.timestamp} "
                            f"keySize: {-1 if r.key is None else len(r.key)} "
                            f"valueSize: {-1 if r.value is None else len(r.value)} "
                            f"sequence: {seq} headerKeys: [{','.join(k for k, _ in r.headers)}]")
                    if v.is_control and data:
                        line += f" endTxnMarker: {'COMMIT' if _is_commit(r.key) else 'ABORT'}"
                    elif data:
                        if r.key is not None:
                            line += f" key: {_show(r.key)}"
                        line += f" payload: {_show(r.value)}"
                    print(line)
        pos += v.size
    return rc


def _is_commit(key: bytes | None) -> bool:
    from sparklog.protocol.control_records import ControlRecordType, parse_control_record_key

    return (key is not None and len(key) >= 4
            and parse_control_record_key(key)[1] == ControlRecordType.COMMIT)


def _dump_txn_index(path: str) -> int:
    """Aborted transactions, in kafka-dump-log.sh's words."""
    from sparklog.storage.txn_index import TransactionIndex

    entries = TransactionIndex(path).entries
    for e in entries:
        print(f"version: 0 producerId: {e.producer_id} firstOffset: {e.first_offset} "
              f"lastOffset: {e.last_offset} lastStableOffset: {e.last_stable_offset}")
    print(f"Aborted transactions: {len(entries)}")
    return 0


def _dump_entries(path: str, entry: struct.Struct, line: Callable[[int, int, int], str],
                  what: str) -> int:
    """An index file's entries, one ``line(base offset, field 1, field 2)`` each, then how
    many there are."""
    base = _base_offset(path)
    with open(path, "rb") as fh:
        raw = fh.read()
    n = 0
    for i in range(0, len(raw) - len(raw) % entry.size, entry.size):
        a, b = entry.unpack_from(raw, i)
        if i and a == 0 and b == 0:
            break  # preallocated, unused tail (Kafka's index files)
        print(line(base, a, b))
        n += 1
    print(f"{what} entries: {n}")
    return 0
