"""Small text files Kafka keeps beside the logs, written atomically.

Every file here is replaced with *write temp file, fsync it, rename over the old one, fsync
the directory*, so a crash leaves either the old or the new content, never a mix. The formats
are Kafka's own, so a Kafka broker pointed at the same ``log.dirs`` could read them:

``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint``,
``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint`` (one per log dir)::

    0                      <- version
    2                      <- number of entries
    orders 0 1500          <- "<topic> <partition> <offset>", one line per partition
    orders 1 980

``leader-epoch-checkpoint`` (one per partition)::

    0
    2
    0 0                    <- "<leader epoch> <start offset>"
    3 1200

``partition.metadata`` (one per partition)::

    version: 0
    topic_id: <22-char url-safe base64 topic UUID, no padding>

``meta.properties`` (one per log dir; Java properties, KRaft v1)::

    version=1
    cluster.id=<id>
    node.id=<int>
    directory.id=<22-char base64 uuid>
"""

from __future__ import annotations

import base64
import os
import uuid

from sparklog.protocol.errors import KafkaStorageError
from sparklog.protocol.topic_partition import TopicPartition

__all__ = [
    "atomic_write",
    "OffsetCheckpointFile",
    "read_offset_checkpoint",
    "write_offset_checkpoint",
    "read_epoch_checkpoint",
    "write_epoch_checkpoint",
    "format_epoch_checkpoint",
    "read_partition_metadata",
    "write_partition_metadata",
    "read_meta_properties",
    "write_meta_properties",
    "topic_id_to_str",
    "topic_id_from_str",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "CLEANER_CHECKPOINT",
    "META_PROPERTIES",
    "CLEAN_SHUTDOWN_MARKER",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
_VERSION = 0


def fsync_dir(path: str) -> None:
    """Make a rename/creation in ``path`` durable (POSIX needs the directory fsynced)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes | str) -> None:
    """Replace ``path`` with ``data``: temp file + fsync + rename + directory fsync."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    tmp = path + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_dir(os.path.dirname(path) or ".")
    except OSError as exc:
        raise KafkaStorageError(f"failed to write {path}: {exc}") from exc


def _read_lines(path: str) -> list[str] | None:
    """The file's lines; None when it does not exist; KafkaStorageError when it is not text."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise KafkaStorageError(f"malformed checkpoint {path}: not UTF-8 text ({exc})") from None


def _parse_counted(path: str, lines: list[str], fields: int) -> list[list[str]]:
    if len(lines) < 2:
        raise KafkaStorageError(f"malformed checkpoint {path}: missing header")
    try:
        version, count = int(lines[0]), int(lines[1])
    except ValueError as exc:
        raise KafkaStorageError(f"malformed checkpoint {path}: bad header") from exc
    if version != _VERSION:
        raise KafkaStorageError(f"unrecognised checkpoint version {version} in {path}")
    body = [ln for ln in lines[2:] if ln.strip()]
    if len(body) != count:
        raise KafkaStorageError(
            f"malformed checkpoint {path}: expected {count} entries, found {len(body)}"
        )
    out = []
    for ln in body:
        parts = ln.split()
        if len(parts) != fields:
            raise KafkaStorageError(f"malformed line in checkpoint {path}: {ln!r}")
        out.append(parts)
    return out


def read_offset_checkpoint(path: str) -> dict[TopicPartition, int]:
    """(topic, partition) -> offset; a missing file is empty."""
    lines = _read_lines(path)
    if lines is None:
        return {}
    out: dict[TopicPartition, int] = {}
    for topic, partition, offset in _parse_counted(path, lines, 3):
        try:
            out[TopicPartition(topic, int(partition))] = int(offset)
        except ValueError as exc:
            raise KafkaStorageError(f"malformed entry in checkpoint {path}") from exc
    return out


def write_offset_checkpoint(path: str, entries: dict[TopicPartition, int]) -> None:
    lines = [str(_VERSION), str(len(entries))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    atomic_write(path, "\n".join(lines) + "\n")


class OffsetCheckpointFile:
    """A named per-log-dir checkpoint; thin object form for the LogManager."""

    def __init__(self, path: str) -> None:
        self.path = path

    def read(self) -> dict[TopicPartition, int]:
        return read_offset_checkpoint(self.path)

    def write(self, entries: dict[TopicPartition, int]) -> None:
        write_offset_checkpoint(self.path, entries)


def read_epoch_checkpoint(path: str) -> list[tuple[int, int]]:
    lines = _read_lines(path)
    if lines is None:
        return []
    try:
        return [(int(e), int(o)) for e, o in _parse_counted(path, lines, 2)]
    except ValueError as exc:
        raise KafkaStorageError(f"malformed entry in {path}") from exc


def format_epoch_checkpoint(entries: list[tuple[int, int]]) -> str:
    """The ``leader-epoch-checkpoint`` text of ``entries`` (also uploaded with segments)."""
    lines = [str(_VERSION), str(len(entries))] + [f"{e} {o}" for e, o in entries]
    return "\n".join(lines) + "\n"


def write_epoch_checkpoint(path: str, entries: list[tuple[int, int]]) -> None:
    atomic_write(path, format_epoch_checkpoint(entries))


def topic_id_to_str(topic_id: bytes | str | uuid.UUID) -> str:
    """Kafka prints a Uuid as url-safe base64 without padding (22 chars)."""
    if isinstance(topic_id, str):
        return topic_id
    raw = topic_id.bytes if isinstance(topic_id, uuid.UUID) else bytes(topic_id)
    if len(raw) != 16:
        raise ValueError("a topic id is 16 bytes")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def topic_id_from_str(s: str) -> bytes:
    raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a topic id: {s!r}")
    return raw


def write_partition_metadata(path: str, topic_id: bytes | str | uuid.UUID) -> None:
    atomic_write(path, f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}\n")


def read_partition_metadata(path: str) -> bytes | None:
    """The topic id (16 bytes), or None when the file is absent."""
    lines = _read_lines(path)
    if lines is None:
        return None
    fields = dict(ln.split(":", 1) for ln in lines if ":" in ln)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise KafkaStorageError(f"malformed partition metadata {path}")
    return topic_id_from_str(fields["topic_id"])


def read_meta_properties(path: str) -> dict[str, str] | None:
    lines = _read_lines(path)
    if lines is None:
        return None
    out: dict[str, str] = {}
    for ln in lines:
        ln = ln.strip()
        if not ln or ln.startswith("#") or "=" not in ln:
            continue
        k, v = ln.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def write_meta_properties(path: str, props: dict[str, str]) -> None:
    body = "#\n" + "".join(f"{k}={v}\n" for k, v in sorted(props.items()))
    atomic_write(path, body)
