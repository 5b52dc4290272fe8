"""The jvm-shim jar: sparklog's Spark plugin (``org.sparklog.shim.SparklogPlugin``), whose
driver side runs the controller and whose executor side runs one broker per executor.

The jar is never committed: it is compiled from ``jvm-shim/src`` with ``javac`` + ``jar``
against the jars inside the installed pyspark wheel (no Maven, no network) into
``sparklog/cluster/jars/``, by ``./dev setup`` or on first use by ``jar_path()``
(``python -m sparklog.cluster.spark_plugin`` prints its path, for ``spark-submit --jars``).
Invariant: ``jar_path()`` returns a jar built from the current sources: one older than any
source file is rebuilt.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["PLUGIN_CLASS", "ShimBuildError", "build_jar", "jar_path"]

PLUGIN_CLASS = "org.sparklog.shim.SparklogPlugin"
JAR = Path(__file__).resolve().parent / "jars" / "sparklog-shim.jar"
SOURCES = Path(__file__).resolve().parents[2] / "jvm-shim" / "src"


class ShimBuildError(RuntimeError):
    """The jar is missing and cannot be built here (no sources, no JDK, or javac failed)."""


def _sources() -> list[Path]:
    return sorted(SOURCES.rglob("*.java")) if SOURCES.is_dir() else []


def _pyspark_jars() -> Path:
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    if not jars.is_dir():
        raise ShimBuildError(f"pyspark has no jars directory ({jars})")
    return jars


def build_jar(out: Path = JAR) -> Path:
    """Compile ``jvm-shim/src`` against pyspark's jars into ``out``."""
    sources = _sources()
    if not sources:
        raise ShimBuildError(f"the jvm-shim sources are not here ({SOURCES}): build the jar "
                             "from a sparklog checkout (./dev setup)")
    javac, jar = shutil.which("javac"), shutil.which("jar")
    if javac is None or jar is None:
        raise ShimBuildError("javac and jar (a JDK 17+) are needed to build the sparklog "
                             "Spark plugin; install one (./dev setup does) and retry")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sparklog-shim-") as classes:
        for cmd in ([javac, "--release", "17", "-nowarn", "-cp", f"{_pyspark_jars()}/*",
                     "-d", classes, *map(str, sources)],
                    [jar, "--create", "--file", f"{out}.tmp", "-C", classes, "."]):
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise ShimBuildError(f"{Path(cmd[0]).name} failed:\n{done.stderr}{done.stdout}")
    Path(f"{out}.tmp").replace(out)
    return out


def jar_path() -> Path:
    """The plugin jar, built first when missing or older than its sources."""
    sources = _sources()
    if JAR.exists() and all(s.stat().st_mtime <= JAR.stat().st_mtime for s in sources):
        return JAR
    return build_jar()


if __name__ == "__main__":
    try:
        print(jar_path())
    except ShimBuildError as exc:
        sys.exit(f"sparklog: {exc}")
