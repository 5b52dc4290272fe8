"""``sparklog server`` configuration precedence: defaults < --config < flags < --set."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from sparklog.cli.main import build_parser
from sparklog.cli.server_cmd import build_config

CONF = Path(__file__).resolve().parents[3] / "conf" / "server.properties"


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["server", *argv])


def test_defaults():
    cfg = build_config(_args())
    assert cfg.listener() == ("127.0.0.1", 9092)
    assert cfg.log_dirs == ["./sparklog-data"]


def test_file_then_flags_then_set(tmp_path):
    props = tmp_path / "s.properties"
    props.write_text("listeners=PLAINTEXT://0.0.0.0:19092\nlog.dirs=/from/file\nnum.partitions=4\n")
    cfg = build_config(_args("--config", str(props)))
    assert cfg.listener() == ("0.0.0.0", 19092) and cfg.log_dirs == ["/from/file"]
    assert cfg.get("num.partitions") == 4
    cfg = build_config(_args("--config", str(props), "--port", "7777", "--data-dir", "/flag",
                             "--set", "num.partitions=9", "--set", "log.dirs=/set"))
    assert cfg.listener() == ("0.0.0.0", 7777)
    assert cfg.log_dirs == ["/set"] and cfg.get("num.partitions") == 9


def test_shipped_config_loads():
    cfg = build_config(_args("--config", str(CONF)))
    assert cfg.listener() == ("127.0.0.1", 9092)


def test_bad_set_is_rejected():
    with pytest.raises(SystemExit):
        build_config(_args("--set", "novalue"))


@pytest.mark.parametrize(("sets", "message"), [
    (["controller.quorum.voters=0@127.0.0.1:1,1@127.0.0.1:2"], "exactly one"),
    (["process.roles=broker"], "needs controller.quorum.voters"),
    (["process.roles=zookeeper"], "process.roles must be"),
])
def test_bad_roles_fail_at_start_with_a_clear_message(tmp_path, capsys, sets, message):
    from sparklog.cli.main import main

    argv = ["server", "--data-dir", str(tmp_path), "--port", "0"]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "invalid configuration" in err and message in err
    assert not any(tmp_path.iterdir())  # refused before anything was written
