package isorag;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.SettingValueParsers;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.kernel.internal.Version;
import org.neo4j.logging.Level;
import org.neo4j.logging.log4j.Log4jLogProvider;

/**
 * isorag's local Neo4j: an embedded Neo4j Community DBMS with the Bolt connector on 127.0.0.1 only,
 * authentication off. Started detached by engine/local_neo4j.py; stops cleanly on SIGTERM.
 *
 * <pre>
 * java -Xmx2g -cp 'lib/*:classes' isorag.Neo4jServer --home DIR --port 7687 [--pagecache 1g] [--tx-timeout 10m]
 * </pre>
 *
 * Layout under DIR: data/ (stores, tx logs), logs/debug.log (Neo4j), logs/isorag-neo4j.log (this launcher),
 * run/ready.json (written once the default database is available, removed on shutdown).
 * An optional DIR/neo4j.conf is loaded first; the settings below always override it.
 */
public final class Neo4jServer {
    public static final String READY_LINE = "ISORAG-NEO4J READY";

    private static Path logFile;

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = parseArgs(argv);
        Path home = Path.of(args.getOrDefault("home", ".")).toAbsolutePath().normalize();
        int port = Integer.parseInt(args.getOrDefault("port", "7687"));
        String pagecache = args.getOrDefault("pagecache", "1g");
        Duration txTimeout = parseDuration(args.getOrDefault("tx-timeout", "10m"));

        Files.createDirectories(home.resolve("logs"));
        Files.createDirectories(home.resolve("run"));
        logFile = home.resolve("logs").resolve("isorag-neo4j.log");
        Path ready = home.resolve("run").resolve("ready.json");
        Files.deleteIfExists(ready); // left over from a crash
        long pid = ProcessHandle.current().pid();
        String version = Version.getNeo4jVersion();
        log("starting Neo4j " + version + " pid=" + pid + " home=" + home + " bolt=127.0.0.1:" + port
                + " pagecache=" + pagecache + " heap(max)=" + (Runtime.getRuntime().maxMemory() >> 20) + "m"
                + " tx-timeout=" + txTimeout);

        DatabaseManagementServiceBuilder builder = new DatabaseManagementServiceBuilder(home);
        Path conf = home.resolve("neo4j.conf");
        if (Files.isRegularFile(conf)) {
            log("loading extra settings from " + conf);
            builder.loadPropertiesFromFile(conf);
        }
        builder.setUserLogProvider(new Log4jLogProvider(System.out, Level.INFO))
                .setConfig(BoltConnector.enabled, true)
                .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", port))
                .setConfig(BoltConnector.advertised_address, new SocketAddress("127.0.0.1", port))
                .setConfig(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED)
                .setConfig(GraphDatabaseSettings.auth_enabled, false) // loopback only
                .setConfig(GraphDatabaseSettings.pagecache_memory, SettingValueParsers.BYTES.parse(pagecache))
                .setConfig(GraphDatabaseSettings.transaction_timeout, txTimeout)
                .setConfig(GraphDatabaseSettings.keep_logical_logs, "1G size")
                .setConfig(GraphDatabaseSettings.udc_enabled, false) // no usage reports (and no network)
                // Netty's graceful-shutdown quiet period (5 s per event loop group) made a stop take 10 s
                .setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_quiet_period, 0);

        final DatabaseManagementService dbms;
        try {
            dbms = builder.build();
        } catch (Throwable t) {
            log("FAILED to start: " + t);
            t.printStackTrace();
            System.exit(2);
            return;
        }

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            log("shutting down (signal)");
            try {
                Files.deleteIfExists(ready);
            } catch (IOException ignored) {
                // best effort
            }
            try {
                dbms.shutdown();
                log("stopped cleanly");
            } catch (Throwable t) {
                log("error during shutdown: " + t);
            }
            stopped.countDown();
        }, "isorag-neo4j-shutdown"));

        String db = GraphDatabaseSettings.DEFAULT_DATABASE_NAME;
        if (!dbms.database(db).isAvailable(Duration.ofMinutes(10).toMillis())) {
            log("FAILED: database '" + db + "' did not become available");
            System.exit(3);
        }
        // warm the Cypher runtime so that "ready" means a query answers quickly
        dbms.database(db).executeTransactionally("RETURN 1");

        String json = String.format("{\"pid\": %d, \"port\": %d, \"version\": \"%s\", \"home\": \"%s\", \"started\": \"%s\"}%n",
                pid, port, version, home.toString().replace("\\", "\\\\").replace("\"", "\\\""), Instant.now());
        Path tmp = ready.resolveSibling("ready.json.tmp");
        Files.writeString(tmp, json, StandardCharsets.UTF_8);
        Files.move(tmp, ready, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        log(READY_LINE + " pid=" + pid + " bolt=bolt://127.0.0.1:" + port + " version=" + version);

        stopped.await(); // the main thread parks; SIGTERM / SIGINT run the shutdown hook
    }

    private static Map<String, String> parseArgs(String[] argv) {
        Map<String, String> out = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            String a = argv[i];
            if (!a.startsWith("--")) {
                usage("unexpected argument " + a);
            }
            String key = a.substring(2);
            String value;
            int eq = key.indexOf('=');
            if (eq >= 0) {
                value = key.substring(eq + 1);
                key = key.substring(0, eq);
            } else if (i + 1 < argv.length) {
                value = argv[++i];
            } else {
                usage("missing value for " + a);
                return out;
            }
            if (!key.equals("home") && !key.equals("port") && !key.equals("pagecache") && !key.equals("tx-timeout")) {
                usage("unknown option --" + key);
            }
            out.put(key, value);
        }
        return out;
    }

    /** "90s", "10m", "1h", "500ms" or a plain number of seconds. */
    private static Duration parseDuration(String s) {
        String t = s.trim().toLowerCase();
        if (t.endsWith("ms")) return Duration.ofMillis(Long.parseLong(t.substring(0, t.length() - 2)));
        if (t.endsWith("s")) return Duration.ofSeconds(Long.parseLong(t.substring(0, t.length() - 1)));
        if (t.endsWith("m")) return Duration.ofMinutes(Long.parseLong(t.substring(0, t.length() - 1)));
        if (t.endsWith("h")) return Duration.ofHours(Long.parseLong(t.substring(0, t.length() - 1)));
        return Duration.ofSeconds(Long.parseLong(t));
    }

    private static void usage(String msg) {
        System.err.println("isorag.Neo4jServer: " + msg);
        System.err.println("usage: isorag.Neo4jServer --home DIR --port N [--pagecache 1g] [--tx-timeout 10m]");
        System.exit(64);
    }

    private static synchronized void log(String msg) {
        String line = Instant.now() + " [isorag-neo4j] " + msg;
        System.out.println(line);
        System.out.flush();
        if (logFile != null) {
            try {
                Files.writeString(logFile, line + System.lineSeparator(), StandardCharsets.UTF_8,
                        StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            } catch (IOException e) {
                PrintStream err = System.err;
                err.println("cannot write " + logFile + ": " + e);
            }
        }
    }
}
