"""How many brokers the Spark-hosted cluster's driver application waits for."""

from __future__ import annotations

import pytest
from pyspark import SparkConf

from sparklog.cluster.spark_app import expected_brokers


@pytest.mark.parametrize(("settings", "want"), [
    ({"spark.master": "local-cluster[3,1,1024]"}, 3),
    ({"spark.master": "local-cluster[ 2 , 1, 1024]", "spark.executor.instances": "5"}, 2),
    ({"spark.master": "spark://h:7077", "spark.executor.instances": "5"}, 5),
    ({"spark.master": "yarn"}, 1),
    ({"spark.master": "local-cluster[3,1,1024]", "spark.sparklog.brokers": "2"}, 2),
])
def test_expected_brokers(settings, want):
    conf = SparkConf(loadDefaults=False)
    for key, value in settings.items():
        conf.set(key, value)
    assert expected_brokers(conf) == want
