"""The jvm-shim jar is built from its sources against pyspark's jars (javac + jar, no Maven)
and holds the plugin class Spark loads; jar_path() rebuilds a jar older than its sources."""

from __future__ import annotations

import os
import zipfile

from sparklog.cluster import spark_plugin


def test_build_jar_holds_the_plugin_classes(tmp_path):
    jar = spark_plugin.build_jar(tmp_path / "shim.jar")
    names = set(zipfile.ZipFile(jar).namelist())
    main_class = spark_plugin.PLUGIN_CLASS.replace(".", "/") + ".class"
    assert main_class in names
    assert {"org/sparklog/shim/ControllerPlugin.class",
            "org/sparklog/shim/BrokerPlugin.class"} <= names


def test_jar_path_rebuilds_a_stale_jar():
    jar = spark_plugin.jar_path()
    assert jar.is_file()
    source = next(spark_plugin.SOURCES.rglob("*.java"))
    old = source.stat().st_mtime - 3600
    os.utime(jar, (old, old))
    assert spark_plugin.jar_path().stat().st_mtime > old
