package org.sparklog.shim;

import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * Runs a sparklog cluster inside a Spark application ({@code spark.plugins=org.sparklog.shim.SparklogPlugin}):
 * the driver hosts the controller ({@link ControllerPlugin}), every executor hosts one broker
 * ({@link BrokerPlugin}). Both are Python processes ({@code python -m sparklog.cli.main server})
 * the plugin starts on init and stops on shutdown; they also stop on their own when the JVM that
 * started them dies (they watch their stdin, a pipe only this JVM holds).
 */
public final class SparklogPlugin implements SparkPlugin {
    @Override
    public DriverPlugin driverPlugin() {
        return new ControllerPlugin();
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return new BrokerPlugin();
    }
}
