"""format("sparklog") needs no register call: pyspark must be able to find pyspark_sparklog.

pyspark's lookup (pyspark.sql.worker.lookup_data_sources) lists top-level modules with
pkgutil.iter_modules() in a fresh Python worker and registers ``DefaultSource`` of every
``pyspark_*`` one. Checked here in a fresh interpreter outside the repository, the way a
worker sees the installation.
"""

import subprocess
import sys
import tempfile

SCRIPT = """
import pkgutil
from pyspark.sql.datasource import DataSource
names = [m.name for m in pkgutil.iter_modules() if m.name.startswith("pyspark_")]
assert "pyspark_sparklog" in names, names
import pyspark_sparklog
assert issubclass(pyspark_sparklog.DefaultSource, DataSource)
print(pyspark_sparklog.DefaultSource.name())
"""


def test_pyspark_lookup_finds_default_source():
    with tempfile.TemporaryDirectory() as cwd:
        out = subprocess.run(
            [sys.executable, "-c", SCRIPT], cwd=cwd, capture_output=True, text=True, timeout=120
        )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "sparklog"
