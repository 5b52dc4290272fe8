"""Object stores for tier tests: moto's standalone S3 server as a child process, and a
wrapper filesystem that fails or delays a fraction of calls.

``MotoS3`` runs ``python -m moto.server`` on 127.0.0.1 at a free port (a real S3 HTTP API;
s3fs talks to it as it would to AWS) and stops it in ``stop``. ``FaultyFileSystem`` wraps a
real fsspec filesystem: each call the tier makes fails with ``OSError`` with probability
``fail_rate`` (a 5xx, a timeout) or sleeps ``delay_s`` first with probability
``delay_rate`` (throttling), and an upload stores only the first half of the file with
probability ``partial_rate`` (then fails, or claims success: a short object), from a seeded
RNG so a failing run repeats; while its ``gate`` is cleared every call hangs (a store that
stopped answering).

``FaultyStore`` is a ``FaultyFileSystem`` that fsspec builds from a URL (``faulty://...``
with string options), so a broker *process* can be pointed at a faulty store
(``tests/helpers/faulty_store_server.py`` registers it); a test changes the faults of the
running broker through a control file (``FaultSwitch``).
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import fsspec
from fsspec import AbstractFileSystem

from tests.helpers.net import free_port
from tests.helpers.polling import wait_for

__all__ = ["FaultSwitch", "FaultyFileSystem", "FaultyStore", "MotoS3"]


class MotoS3:
    """moto's S3 server; ``options`` are the s3fs options (also as broker ``--set`` keys)."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"moto-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def options(self) -> dict[str, Any]:
        return {"endpoint_url": self.endpoint, "key": "testing", "secret": "testing"}

    def broker_settings(self, bucket: str) -> list[str]:
        """``sparklog server`` flags pointing the tier at ``s3://<bucket>/tier``."""
        out = ["--set", f"remote.log.storage.url=s3://{bucket}/tier"]
        for k, v in self.options.items():
            out += ["--set", f"remote.log.storage.options.{k}={v}"]
        return out

    def start(self) -> MotoS3:
        with open(self.log_path, "wb") as logf:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=logf, stderr=subprocess.STDOUT)
        wait_for(self._listening, 30, "moto server to listen")
        return self

    def _listening(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"moto exited:\n{self.log_path.read_text()}")
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def create_bucket(self, name: str) -> None:
        fs = self.filesystem()
        fs.mkdir(name)

    def filesystem(self) -> AbstractFileSystem:
        return fsspec.filesystem("s3", skip_instance_cache=True, **self.options)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None


class FaultyFileSystem(AbstractFileSystem):
    """``inner`` with injected faults on the calls the tier makes."""

    cachable = False
    protocol = "faulty"

    def __init__(self, inner: AbstractFileSystem, *, fail_rate: float = 0.0,
                 delay_rate: float = 0.0, delay_s: float = 0.05, partial_rate: float = 0.0,
                 seed: int = 0) -> None:
        super().__init__()
        self.inner = inner
        # while cleared, every call waits for it (a store that hangs); set by default
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = 0  # calls waiting at the gate now
        self.fail_rate = fail_rate
        self.delay_rate = delay_rate
        self.delay_s = delay_s
        self.partial_rate = partial_rate
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.calls = 0
        self.failures = 0
        self.partials = 0  # uploads that stored only part of the file

    def _fault(self, what: str) -> None:
        if not self.gate.is_set():
            with self._lock:
                self.waiting += 1
            self.gate.wait()
            with self._lock:
                self.waiting -= 1
        with self._lock:
            self.calls += 1
            fail = self._rng.random() < self.fail_rate
            delay = self._rng.random() < self.delay_rate
            if fail:
                self.failures += 1
        if delay:
            time.sleep(self.delay_s)
        if fail:
            raise OSError(f"injected fault in {what}")

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        self._fault("makedirs")
        self.inner.makedirs(path, exist_ok=exist_ok)

    def _partial(self) -> tuple[bool, bool]:
        """(store only part of this upload, and then fail it)."""
        if self.partial_rate <= 0:  # no draw: seeded runs without partial uploads repeat
            return False, False
        with self._lock:
            cut = self._rng.random() < self.partial_rate
            fail = self._rng.random() < 0.5
            self.partials += cut
        return cut, fail

    def put_file(self, lpath: str, rpath: str, **kw: Any) -> None:
        self._fault("put_file")
        cut, fail = self._partial()
        if not cut:
            self.inner.put_file(lpath, rpath, **kw)
            return
        data = Path(lpath).read_bytes()
        self.inner.pipe_file(rpath, data[: len(data) // 2])
        if fail:
            raise OSError(f"injected fault: upload of {rpath} cut off")

    def pipe_file(self, path: str, value: bytes, **kw: Any) -> None:
        self._fault("pipe_file")
        self.inner.pipe_file(path, value, **kw)

    def size(self, path: str) -> int:
        self._fault("size")
        return self.inner.size(path)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None,
                 **kw: Any) -> bytes:
        self._fault("cat_file")
        return self.inner.cat_file(path, start=start, end=end, **kw)

    def mv(self, path1: str, path2: str, **kw: Any) -> None:
        self._fault("mv")
        self.inner.mv(path1, path2, **kw)

    def rm_file(self, path: str) -> None:
        self._fault("rm_file")
        self.inner.rm_file(path)

    def rm(self, path: str, recursive: bool = False, **kw: Any) -> None:
        self._fault("rm")
        self.inner.rm(path, recursive=recursive, **kw)

    def modified(self, path: str) -> Any:
        self._fault("modified")
        return self.inner.modified(path)

    def exists(self, path: str, **kw: Any) -> bool:
        return self.inner.exists(path, **kw)

    def find(self, path: str, **kw: Any) -> Any:
        self._fault("find")
        return self.inner.find(path, **kw)

    def invalidate_cache(self, path: str | None = None) -> None:
        self.inner.invalidate_cache(path)  # s3fs keeps listings


class FaultyStore(FaultyFileSystem):
    """``FaultyFileSystem`` that fsspec builds from a URL and string options (a broker's
    ``remote.log.storage.url`` and ``remote.log.storage.options.<key>``).

    ``faulty://<path>``: ``<path>`` as the real store names it (``faulty:///abs/dir`` for
    ``file``, ``faulty://bucket/prefix`` for ``s3``). Options: ``target_protocol`` (the real
    store, default ``file``), ``fail_rate``, ``delay_rate``, ``delay_s``, ``partial_rate``,
    ``seed``, ``control_file``; any other goes to the real store (s3fs's ``endpoint_url``,
    ``key``, ``secret``). With ``control_file`` a thread applies that JSON file's faults
    every ``CONTROL_INTERVAL_S`` (the same keys, plus ``hang``: calls wait while it is true;
    a key left out takes the URL's value) and writes what it applied with the counters to
    ``<control_file>.state`` (``FaultSwitch`` is the test's end of both files).
    """

    protocol = "faulty"
    CONTROL_INTERVAL_S = 0.05

    def __init__(self, target_protocol: str = "file", *, fail_rate: str | float = 0.0,
                 delay_rate: str | float = 0.0, delay_s: str | float = 0.05,
                 partial_rate: str | float = 0.0, seed: str | int = 0,
                 control_file: str = "", **target_options: Any) -> None:
        self.defaults = {"fail_rate": float(fail_rate), "delay_rate": float(delay_rate),
                         "delay_s": float(delay_s), "partial_rate": float(partial_rate)}
        inner = fsspec.filesystem(target_protocol, skip_instance_cache=True, **target_options)
        super().__init__(inner, seed=int(seed), **self.defaults)
        if control_file:
            threading.Thread(target=self._follow, args=(FaultSwitch(Path(control_file)),),
                             name="faulty-store-control", daemon=True).start()

    def apply(self, control: dict[str, Any]) -> None:
        """Set the faults ``control`` names, the URL's values for the others."""
        for key, default in self.defaults.items():
            setattr(self, key, float(control.get(key, default)))
        if control.get("hang"):
            self.gate.clear()
        else:
            self.gate.set()

    def _follow(self, switch: FaultSwitch) -> None:
        written = None
        applied: dict[str, Any] = {}
        while True:
            control = switch.control()
            if control is not None:  # else a file being replaced: the faults stay
                self.apply(control)
                applied = control
            state = {"control": applied, "calls": self.calls, "failures": self.failures,
                     "partials": self.partials, "waiting": self.waiting}
            if state != written:
                _write_json(switch.state_path, state)
                written = state
            time.sleep(self.CONTROL_INTERVAL_S)


class FaultSwitch:
    """The faults of a ``FaultyStore`` in another process: ``set`` writes its control file
    and returns once the store applied it; ``state`` is what it applied and counted (calls,
    failures, partials: partial uploads, waiting: calls hanging now)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.state_path = path.with_name(path.name + ".state")

    def control(self) -> dict[str, Any] | None:
        """The control file's faults ({} without one), None when it cannot be read."""
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return None

    def set(self, timeout: float = 10.0, **faults: float | bool) -> None:
        """Replace the faults (none given: a healthy store); waits until they apply."""
        _write_json(self.path, faults)
        wait_for(lambda: self.state().get("control") == faults, timeout,
                 f"the store to apply {faults}")

    def state(self) -> dict[str, Any]:
        try:
            return json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return {}


def _write_json(path: Path, value: object) -> None:
    """Replace ``path`` whole (a reader sees the old content or the new)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)
