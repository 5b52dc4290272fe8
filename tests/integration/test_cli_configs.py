"""``sparklog configs`` against a ``sparklog server`` child process, with kafka-configs.sh's
options and output: dynamic broker configs per broker and cluster-wide, topic overrides,
their synonyms, the one-line errors, and dynamic configs that outlive a restart."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.helpers.cli import ok, one_error, run
from tests.helpers.net import free_port
from tests.helpers.servers import ServerProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path_factory.mktemp("configs") / "data", free_port())
    s.start()
    try:
        yield s
    finally:
        s.stop()


def configs(server: ServerProcess, *args: str) -> str:
    return ok(run("configs", *args, server=server))


def test_broker_configs_per_broker_and_cluster_wide(server: ServerProcess) -> None:
    assert configs(server, "--entity-type", "brokers", "--entity-default", "--alter",
                   "--add-config", "log.retention.ms=7200000,log.cleanup.policy=[delete,compact]"
                   ) == "Completed updating default config for brokers in the cluster.\n"
    assert configs(server, "--entity-type", "brokers", "--entity-name", "1", "--alter",
                   "--add-config", "log.retention.ms=3600000"
                   ) == "Completed updating config for broker 1.\n"
    assert configs(server, "--entity-type", "brokers", "--entity-name", "1", "--describe") == (
        "Dynamic configs for broker 1 are:\n"
        "  log.retention.ms=3600000 sensitive=false synonyms={"
        "DYNAMIC_BROKER_CONFIG:log.retention.ms=3600000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000}\n")
    assert configs(server, "--entity-type", "brokers", "--entity-default", "--describe") == (
        "Default configs for brokers in the cluster are:\n"
        "  log.cleanup.policy=delete,compact sensitive=false synonyms={"
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleanup.policy=delete,compact}\n"
        "  log.retention.ms=7200000 sensitive=false synonyms={"
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000}\n")
    every = configs(server, "--entity-type", "brokers", "--entity-name", "1", "--describe",
                    "--all")
    assert every.startswith("All configs for broker 1 are:\n")
    assert "  num.partitions=1 sensitive=false synonyms={DEFAULT_CONFIG:num.partitions=1}\n" \
        in every

    # a topic without overrides takes its defaults from them
    topic = f"cfg-{uuid.uuid4().hex[:8]}"
    ok(run("topics", "create", "--topic", topic, server=server))
    out = configs(server, "--entity-type", "topics", "--entity-name", topic, "--describe",
                  "--all")
    assert ("  retention.ms=3600000 sensitive=false synonyms={"
            "DYNAMIC_BROKER_CONFIG:log.retention.ms=3600000, "
            "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000, "
            "DEFAULT_CONFIG:log.retention.hours=168}\n") in out

    for entity in (["--entity-name", "1"], ["--entity-default"]):
        configs(server, "--entity-type", "brokers", *entity, "--alter", "--delete-config",
                "log.retention.ms,log.cleanup.policy")
    assert configs(server, "--entity-type", "brokers", "--entity-default", "--describe") == \
        "Default configs for brokers in the cluster are:\n"


def test_topic_overrides(server: ServerProcess) -> None:
    topic = f"cfg-{uuid.uuid4().hex[:8]}"
    ok(run("topics", "create", "--topic", topic, "--config", "segment.ms=60000", server=server))
    assert configs(server, "--entity-type", "topics", "--entity-name", topic, "--alter",
                   "--add-config", "retention.ms=1000", "--delete-config", "segment.ms"
                   ) == f"Completed updating config for topic {topic}.\n"
    assert configs(server, "--entity-type", "topics", "--entity-name", topic, "--describe") == (
        f"Dynamic configs for topic {topic} are:\n"
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, "
        "DEFAULT_CONFIG:log.retention.hours=168}\n")


def test_errors_are_one_line(server: ServerProcess) -> None:
    def fails(*args: str, code: int = 1) -> str:
        return one_error(run("configs", *args, server=server), code)

    assert fails("--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config",
                 "log.dirs=/elsewhere") == \
        "Error: Cannot update these configs dynamically: Set(log.dirs)"
    assert fails("--entity-type", "topics", "--entity-name", "cfg-none", "--describe") == \
        "Error: topic 'cfg-none' does not exist"
    assert "segment.bytes" in fails("--entity-type", "brokers", "--entity-default", "--alter",
                                    "--add-config", "log.segment.bytes=lots")
    assert fails("--entity-type", "brokers", "--describe", code=2) == \
        "Error: --entity-type brokers needs --entity-name ID or --entity-default"
    assert fails("--entity-type", "brokers", "--entity-name", "1", "--alter", code=2) == \
        "Error: --alter needs --add-config K=V or --delete-config K"
    assert fails("--entity-type", "topics", "--entity-default", "--describe", code=2) == \
        "Error: --entity-type topics needs --entity-name TOPIC"


def test_dynamic_configs_outlive_a_restart(tmp_path) -> None:  # type: ignore[no-untyped-def]
    s = ServerProcess(tmp_path / "data", free_port()).start()
    try:
        configs(s, "--entity-type", "brokers", "--entity-default", "--alter",
                "--add-config", "message.max.bytes=2000000")
        s.stop()
        s.start()
        assert configs(s, "--entity-type", "brokers", "--entity-default", "--describe") == (
            "Default configs for brokers in the cluster are:\n"
            "  message.max.bytes=2000000 sensitive=false synonyms={"
            "DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=2000000}\n")
    finally:
        s.stop()
