package org.sparklog.shim;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.PluginContext;

/**
 * The driver's side: starts the controller (node 0, the driver's Python) before any executor
 * starts, and hands its address to every executor in the map {@code init} returns (key
 * {@code controller.quorum.voters}); the same value is put in the driver's configuration
 * ({@code spark.sparklog.controller.quorum.voters}) for the driver application. Executors may
 * also ask for it ({@link #receive}). Stops the controller when the application stops (and
 * removes its data dir when it was a temporary one: {@code spark.sparklog.dataDir} unset).
 */
public final class ControllerPlugin implements DriverPlugin {
    static final int CONTROLLER_ID = 0;
    static final String VOTERS = "controller.quorum.voters";
    static final String VOTERS_CONF = "spark.sparklog.controller.quorum.voters";
    /** Spark setting: the controller's port (default: any free one). */
    static final String PORT_CONF = "spark.sparklog.controller.port";
    static final long START_TIMEOUT_MS = 120_000;

    private NodeProcess controller;
    private String voters;
    /** The controller's data dir when none was configured: removed on shutdown. */
    private Path tempDataDir;

    @Override
    public Map<String, String> init(SparkContext sc, PluginContext ctx) {
        SparkConf conf = sc.conf();
        String host = conf.get("spark.driver.host", ctx.hostname());
        int port = NodeProcess.freePort(host, conf.get(PORT_CONF, ""));
        String dataDir;
        if (conf.contains(NodeProcess.DATA_DIR)) {
            dataDir = NodeProcess.dataDir(conf, "", CONTROLLER_ID).toString();
        } else {
            try {
                tempDataDir = Files.createTempDirectory("sparklog-controller-");
            } catch (IOException e) {
                throw new UncheckedIOException("sparklog: cannot create the controller's data dir", e);
            }
            dataDir = tempDataDir.toString();
        }
        String python = NodeProcess.python(conf,
            List.of("spark.pyspark.driver.python", "spark.pyspark.python"),
            List.of("PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON"));
        controller = NodeProcess.start("sparklog controller", python, conf, List.of(
            "--data-dir", dataDir, "--host", host, "--port", Integer.toString(port),
            "--set", "process.roles=controller", "--set", "node.id=" + CONTROLLER_ID));
        controller.awaitListening(host, port, START_TIMEOUT_MS);
        voters = CONTROLLER_ID + "@" + host + ":" + port;
        conf.set(VOTERS_CONF, voters);
        return Map.of(VOTERS, voters);
    }

    /** Any message is a question for the controller's address. */
    @Override
    public Object receive(Object message) {
        return voters;
    }

    @Override
    public void shutdown() {
        if (controller != null) {
            controller.stop();
            controller = null;
        }
        if (tempDataDir != null) {
            try (Stream<Path> paths = Files.walk(tempDataDir)) {
                paths.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
            } catch (IOException e) {
                // a temporary directory left behind is the system's to clean
            }
            tempDataDir = null;
        }
    }
}
