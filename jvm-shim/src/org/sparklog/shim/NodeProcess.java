package org.sparklog.shim;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkConf;
import scala.Tuple2;

/**
 * One {@code sparklog server} child process: how it is started (the Spark configuration's
 * Python, the server keys from {@code spark.sparklog.server.*}, output to this JVM's own
 * stdout/stderr, so to the driver's or executor's log) and stopped (SIGTERM, the node's
 * controlled shutdown, then a kill after the grace period).
 *
 * <p>Invariant: the child's stdin is a pipe only this JVM holds and the server runs with
 * {@code --stop-on-stdin-close}, so the node shuts down when this JVM exits, even by SIGKILL.
 */
final class NodeProcess {
    /** Spark settings with this prefix are handed to every node as {@code --set KEY=VALUE}. */
    static final String SERVER_PREFIX = "spark.sparklog.server.";
    /** Spark setting: the directory every node's data goes under ({@code DIR/node-<id>}). */
    static final String DATA_DIR = "spark.sparklog.dataDir";
    /** How long a controlled shutdown may take before the node is killed. */
    static final long STOP_GRACE_SECONDS = 30;

    private final Process process;
    private final String name;

    private NodeProcess(Process process, String name) {
        this.process = process;
        this.name = name;
    }

    /** Starts {@code python -m sparklog.cli.main server} with {@code args} and the server keys. */
    static NodeProcess start(String name, String python, SparkConf conf, List<String> args) {
        List<String> cmd = new ArrayList<>(List.of(
            python, "-m", "sparklog.cli.main", "server", "--stop-on-stdin-close"));
        cmd.addAll(args);
        for (Tuple2<String, String> kv : conf.getAllWithPrefix(SERVER_PREFIX)) {
            cmd.add("--set");
            cmd.add(kv._1() + "=" + kv._2());
        }
        ProcessBuilder pb = new ProcessBuilder(cmd)
            .redirectOutput(ProcessBuilder.Redirect.INHERIT)
            .redirectError(ProcessBuilder.Redirect.INHERIT);
        try {
            return new NodeProcess(pb.start(), name);
        } catch (IOException e) {
            throw new UncheckedIOException("sparklog: cannot start the " + name + ": " + cmd, e);
        }
    }

    /** The Python a node runs with: the first of {@code keys} (Spark settings, then
     * environment variables of the same meaning) that is set, else {@code python3}. */
    static String python(SparkConf conf, List<String> confKeys, List<String> envKeys) {
        for (String key : confKeys) {
            if (conf.contains(key)) {
                return conf.get(key);
            }
        }
        Map<String, String> env = System.getenv();
        for (String key : envKeys) {
            String value = env.get(key);
            if (value != null && !value.isEmpty()) {
                return value;
            }
        }
        return "python3";
    }

    /** The data directory of node {@code nodeId}: {@code DIR/node-<id>} under
     * {@code spark.sparklog.dataDir} when set, else {@code node-<id>} under {@code localDir}. */
    static Path dataDir(SparkConf conf, String localDir, int nodeId) {
        String root = conf.contains(DATA_DIR) ? conf.get(DATA_DIR) : localDir;
        return Path.of(root, "node-" + nodeId).toAbsolutePath();
    }

    /** The first port of {@code range} ("LO-HI", or one port; "" for any) that {@code host}
     * can bind now. */
    static int freePort(String host, String range) {
        int lo = 0;
        int hi = 0;
        if (!range.isEmpty()) {
            String[] bounds = range.split("-", 2);
            lo = Integer.parseInt(bounds[0].trim());
            hi = bounds.length > 1 ? Integer.parseInt(bounds[1].trim()) : lo;
        }
        for (int port = lo; port <= hi; port++) {
            try (ServerSocket socket = new ServerSocket()) {
                socket.setReuseAddress(true);
                socket.bind(new InetSocketAddress(host, port));
                return socket.getLocalPort();
            } catch (IOException busy) {
                // next one
            }
        }
        throw new IllegalStateException("sparklog: no free port in " + range + " on " + host);
    }

    /** Blocks until something accepts connections on host:port (the node is serving). */
    void awaitListening(String host, int port, long timeoutMillis) {
        long deadline = System.currentTimeMillis() + timeoutMillis;
        while (true) {
            try (Socket socket = new Socket()) {
                socket.connect(new InetSocketAddress(host, port), 1000);
                return;
            } catch (IOException notYet) {
                if (!process.isAlive()) {
                    throw new IllegalStateException("sparklog: the " + name + " exited with "
                        + process.exitValue() + " during start (see this log)");
                }
                if (System.currentTimeMillis() > deadline) {
                    stop();
                    throw new IllegalStateException("sparklog: the " + name + " did not listen on "
                        + host + ":" + port + " within " + timeoutMillis + " ms");
                }
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    stop();
                    throw new IllegalStateException("sparklog: interrupted starting the " + name, e);
                }
            }
        }
    }

    /** SIGTERM (the node's controlled shutdown), then SIGKILL after the grace period. */
    void stop() {
        if (!process.isAlive()) {
            return;
        }
        process.destroy();
        try {
            if (!process.waitFor(STOP_GRACE_SECONDS, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }

    long pid() {
        return process.pid();
    }
}
