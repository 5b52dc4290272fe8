"""``./dev demo`` (the main job, examples/quickstart.py) and ``./dev`` itself, as a user runs
them: what they print and what they leave behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib

import pytest

from tests.helpers.servers import REPO

# Spark start-up lines that say nothing about the job (conf/log4j2.properties silences them)
SPARK_NOISE = ("Using Spark's default log4j profile", "Setting default log level",
               "To adjust logging level", "NativeCodeLoader")


@pytest.mark.slow
def test_quickstart_output_moves_and_leaves_nothing_behind(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    res = subprocess.run([sys.executable, "examples/quickstart.py", "--events", "8000"],
                         cwd=str(REPO), env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "quickstart OK" in res.stdout
    for noise in SPARK_NOISE:
        assert noise not in res.stdout + res.stderr, noise
    # nothing of the job's own left in the temp dir (Spark's JVM uses java.io.tmpdir, /tmp)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("sparklog")] == []
    # the console view: each micro-batch says how far the count got and shows only the
    # windows that changed, so consecutive batches never print the same table
    batches = re.findall(r"micro-batch (\d+): ([\d,]+) events counted so far \(\+([\d,]+)\)",
                         res.stdout)
    assert batches, res.stdout
    totals = [int(total.replace(",", "")) for _, total, _ in batches]
    assert totals == sorted(totals) and totals[-1] == 8000
    assert all(int(gain.replace(",", "")) > 0 for _, _, gain in batches)
    blocks = re.split(r"  micro-batch \d+: ", res.stdout)[1:]
    assert len(set(blocks)) == len(blocks)


def test_dev_test_prints_the_slowest_tests(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text("def test_probe():\n    pass\n")
    env = dict(os.environ, SPARKLOG_VENV=sys.prefix)
    res = subprocess.run([str(REPO / "dev"), "test", str(probe), "-q", "-p", "no:cacheprovider",
                          "--rootdir", str(tmp_path)],
                         cwd=str(REPO), env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "slowest 15 durations" in res.stdout


def test_license_is_an_spdx_string():
    """setuptools >= 77 warns (three times per install) about the TOML-table form."""
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in meta["build-system"]["requires"]
