"""FileSlice: the read unit a fetch sends (by descriptor when local, else by path)."""

from __future__ import annotations

import os

from sparklog.storage import FileSlice


def test_reads_by_descriptor_and_by_path(tmp_path):
    path = str(tmp_path / "seg.log")
    with open(path, "wb") as f:
        f.write(b"0123456789")
    fd = os.open(path, os.O_RDONLY)
    try:
        by_fd = FileSlice(path, 2, 5, fd)
        assert by_fd.fileno() == fd and len(by_fd) == 5
        assert by_fd.read_bytes() == b"23456"
        buf = bytearray(8)
        assert by_fd.read_into(buf, 1) == 5 and bytes(buf) == b"\x0023456\x00\x00"
    finally:
        os.close(fd)
    by_path = FileSlice(path, 7, 3)
    assert by_path.fileno() is None and by_path.read_bytes() == b"789"


def test_slice_of_a_shrunk_file_reads_short(tmp_path):
    path = str(tmp_path / "seg.log")
    with open(path, "wb") as f:
        f.write(b"0123456789")
    s = FileSlice(path, 6, 10)
    assert s.read_bytes() == b"6789"
