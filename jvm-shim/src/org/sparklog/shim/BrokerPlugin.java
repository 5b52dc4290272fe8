package org.sparklog.shim;

import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.util.Utils;

/**
 * An executor's side: one broker per executor, {@code node.id} = executor id + 1 (the
 * controller is 0; Spark never reuses an executor id within an application, so a replacement
 * executor is a new broker), the executor's Python, its data under the executor's local dir
 * (or {@code spark.sparklog.dataDir}), any free port (or the first free one of
 * {@code spark.sparklog.broker.ports}, "LO-HI"). Shutdown is the broker's controlled shutdown.
 */
public final class BrokerPlugin implements ExecutorPlugin {
    /** Spark setting: the port range brokers take their port from ("LO-HI"). */
    static final String PORTS_CONF = "spark.sparklog.broker.ports";

    private NodeProcess broker;

    @Override
    public void init(PluginContext ctx, Map<String, String> extraConf) {
        SparkConf conf = ctx.conf();
        String voters = extraConf.get(ControllerPlugin.VOTERS);
        if (voters == null) {
            try {
                voters = (String) ctx.ask("controller.quorum.voters");
            } catch (Exception e) {
                throw new IllegalStateException("sparklog: the driver did not tell the controller", e);
            }
        }
        int nodeId;
        try {
            nodeId = Integer.parseInt(ctx.executorID()) + 1;
        } catch (NumberFormatException e) {
            throw new IllegalStateException("sparklog: executor id " + ctx.executorID()
                + " is not a number, no node.id can be derived from it", e);
        }
        // the executor's own address (PluginContext.hostname() needs an RPC server executors lack)
        String host = SparkEnv.get().blockManager().blockManagerId().host();
        // without a range the broker binds any free port itself and registers the one it got
        int port = conf.contains(PORTS_CONF) ? NodeProcess.freePort(host, conf.get(PORTS_CONF)) : 0;
        String localDir = Utils.getLocalDir(SparkEnv.get().conf());
        String python = NodeProcess.python(conf, List.of("spark.pyspark.python"),
            List.of("PYSPARK_PYTHON"));
        broker = NodeProcess.start("sparklog broker " + nodeId, python, conf, List.of(
            "--data-dir", NodeProcess.dataDir(conf, localDir, nodeId).toString(),
            "--host", host, "--port", Integer.toString(port),
            "--set", "process.roles=broker", "--set", "node.id=" + nodeId,
            "--set", ControllerPlugin.VOTERS + "=" + voters));
    }

    @Override
    public void shutdown() {
        if (broker != null) {
            broker.stop();
            broker = null;
        }
    }
}
