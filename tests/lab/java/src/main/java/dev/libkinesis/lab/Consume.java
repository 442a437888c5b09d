package dev.libkinesis.lab;

import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.OutputStream;
import java.lang.reflect.Method;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.http.Protocol;
import software.amazon.awssdk.http.nio.netty.NettyNioAsyncHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.cloudwatch.CloudWatchAsyncClient;
import software.amazon.awssdk.services.dynamodb.DynamoDbAsyncClient;
import software.amazon.awssdk.services.dynamodb.model.BillingMode;
import software.amazon.awssdk.services.kinesis.KinesisAsyncClient;
import software.amazon.kinesis.common.ConfigsBuilder;
import software.amazon.kinesis.common.InitialPositionInStream;
import software.amazon.kinesis.common.InitialPositionInStreamExtended;
import software.amazon.kinesis.common.StreamIdentifier;
import software.amazon.kinesis.coordinator.CoordinatorConfig;
import software.amazon.kinesis.coordinator.Scheduler;
import software.amazon.kinesis.leases.LeaseManagementConfig;
import software.amazon.kinesis.lifecycle.events.InitializationInput;
import software.amazon.kinesis.lifecycle.events.LeaseLostInput;
import software.amazon.kinesis.lifecycle.events.ProcessRecordsInput;
import software.amazon.kinesis.lifecycle.events.ShardEndedInput;
import software.amazon.kinesis.lifecycle.events.ShutdownRequestedInput;
import software.amazon.kinesis.metrics.MetricsLevel;
import software.amazon.kinesis.metrics.NullMetricsFactory;
import software.amazon.kinesis.processor.RecordProcessorCheckpointer;
import software.amazon.kinesis.processor.ShardRecordProcessor;
import software.amazon.kinesis.processor.SingleStreamTracker;
import software.amazon.kinesis.retrieval.KinesisClientRecord;
import software.amazon.kinesis.retrieval.polling.PollingConfig;

/**
 * A KCL consumer for the lab (test code, never product): prints every record it is given as one
 * JSON line on stdout, in the shape of {@code kncat group -J} (stream, shard, seq, subseq, key, ts,
 * data or data_b64), and checkpoints after every batch or every --checkpoint-ms. Compiled against
 * the KCL 2.x and the KCL 3.x (the same source; what only the 3.x has is set by reflection).
 *
 * <pre>
 * java -cp 'target/classes:target/lib/*' dev.libkinesis.lab.Consume --stream S --app A
 *      --worker W --kinesis URL --dynamodb URL [--table T] [--failover-ms 10000]
 *      [--checkpoint-ms 0] [--position trim_horizon|latest] [--idle-ms 200]
 *      [--shard-sync-ms 5000] [--max-leases N] [--steal N] [--client-version 2x|3x]
 *      [--billing on-demand|provisioned] [--log-level warn]
 * </pre>
 *
 * SIGTERM: graceful shutdown (every processor checkpoints; the KCL 2.x does not release its leases,
 * they expire), exit 0; 3 when the KCL's shutdown future has not completed after 30 s.
 */
public final class Consume {
    private static final Object OUT_LOCK = new Object();
    private static OutputStream out;

    private Consume() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = parse(argv);
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", a.getOrDefault("log-level", "warn"));
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
        // kinesalite stores CBOR-encoded data corrupted: the SDK must speak JSON.
        System.setProperty("aws.cborEnabled", "false");
        out = new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16);

        String stream = need(a, "stream");
        String app = need(a, "app");
        String worker = need(a, "worker");
        long checkpointMs = Long.parseLong(a.getOrDefault("checkpoint-ms", "0"));
        Region region = Region.of(a.getOrDefault("region", "us-east-1"));
        StaticCredentialsProvider creds =
                StaticCredentialsProvider.create(AwsBasicCredentials.create("test", "test"));

        KinesisAsyncClient kinesis = KinesisAsyncClient.builder()
                .endpointOverride(URI.create(need(a, "kinesis")))
                .region(region)
                .credentialsProvider(creds)
                .httpClientBuilder(NettyNioAsyncHttpClient.builder()
                        .protocol(Protocol.HTTP1_1)
                        .maxConcurrency(64))
                .build();
        DynamoDbAsyncClient dynamo = DynamoDbAsyncClient.builder()
                .endpointOverride(URI.create(need(a, "dynamodb")))
                .region(region)
                .credentialsProvider(creds)
                .httpClientBuilder(NettyNioAsyncHttpClient.builder().maxConcurrency(64))
                .build();
        // Metrics are off (NullMetricsFactory); the client is required but never called.
        CloudWatchAsyncClient cloudwatch = CloudWatchAsyncClient.builder()
                .endpointOverride(URI.create("http://127.0.0.1:9"))
                .region(region)
                .credentialsProvider(creds)
                .build();

        InitialPositionInStream pos = "latest".equals(a.getOrDefault("position", "trim_horizon"))
                ? InitialPositionInStream.LATEST
                : InitialPositionInStream.TRIM_HORIZON;
        SingleStreamTracker tracker = new SingleStreamTracker(
                StreamIdentifier.singleStreamInstance(stream),
                InitialPositionInStreamExtended.newInitialPosition(pos));
        ConfigsBuilder cb = new ConfigsBuilder(tracker, app, kinesis, dynamo, cloudwatch, worker,
                () -> new Processor(stream, checkpointMs));
        if (a.containsKey("table")) {
            cb.tableName(a.get("table"));
        }

        LeaseManagementConfig leases = cb.leaseManagementConfig()
                .failoverTimeMillis(Long.parseLong(a.getOrDefault("failover-ms", "10000")))
                .shardSyncIntervalMillis(Long.parseLong(a.getOrDefault("shard-sync-ms", "5000")));
        if (a.containsKey("max-leases")) {
            leases.maxLeasesForWorker(Integer.parseInt(a.get("max-leases")));
        }
        if ("provisioned".equals(a.get("billing"))) {
            // dynalite refuses the KCL 3.x's lease-owner index on an on-demand
            // table (UpdateTable without ProvisionedThroughput)
            leases.billingMode(BillingMode.PROVISIONED);
        }
        if (a.containsKey("steal")) {
            leases.maxLeasesToStealAtOneTime(Integer.parseInt(a.get("steal")));
        }
        PollingConfig polling = new PollingConfig(stream, kinesis)
                .idleTimeBetweenReadsInMillis(Long.parseLong(a.getOrDefault("idle-ms", "200")));
        CoordinatorConfig coordinator = cb.coordinatorConfig()
                .parentShardPollIntervalMillis(Long.parseLong(a.getOrDefault("parent-poll-ms", "1000")));
        if (a.containsKey("client-version")) {
            setClientVersion(coordinator, a.get("client-version"));
        }

        Scheduler scheduler = new Scheduler(
                cb.checkpointConfig(),
                coordinator,
                leases,
                cb.lifecycleConfig(),
                cb.metricsConfig().metricsLevel(MetricsLevel.NONE).metricsFactory(new NullMetricsFactory()),
                cb.processorConfig(),
                cb.retrievalConfig().retrievalSpecificConfig(polling));

        Thread runner = new Thread(scheduler, "scheduler");
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            int status = 0;
            try {
                scheduler.startGracefulShutdown().get(30, TimeUnit.SECONDS);
            } catch (TimeoutException e) {
                // seen on kinesis-local: every processor has checkpointed and
                // lost its lease, but the future never completes
                System.err.println("consume: graceful shutdown did not complete in 30 s");
                status = 3;
            } catch (Exception e) {
                System.err.println("consume: graceful shutdown: " + e);
                status = 1;
            }
            flush();
            System.err.println("consume: worker " + worker + " stopped");
            // the JVM would exit 143 after a SIGTERM: 0 tells a clean stop
            Runtime.getRuntime().halt(status);
        }, "shutdown"));
        System.err.println("consume: worker " + worker + " started");
        runner.start();
        runner.join();
        flush();
    }

    /** KCL 3.x only: CoordinatorConfig.clientVersionConfig(CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X|_3X). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    private static void setClientVersion(CoordinatorConfig c, String v) throws Exception {
        Class enumType = Class.forName("software.amazon.kinesis.coordinator.CoordinatorConfig$ClientVersionConfig");
        String name = "2x".equals(v) ? "CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X" : "CLIENT_VERSION_CONFIG_3X";
        Method m = CoordinatorConfig.class.getMethod("clientVersionConfig", enumType);
        m.invoke(c, Enum.valueOf(enumType, name));
    }

    private static void flush() {
        synchronized (OUT_LOCK) {
            try {
                out.flush();
            } catch (Exception e) {
                // stdout closed: nothing left to tell
            }
        }
    }

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name value, got " + argv[i]);
            }
            m.put(argv[i].substring(2), argv[i + 1]);
        }
        if (argv.length % 2 != 0) {
            throw new IllegalArgumentException("option without value: " + argv[argv.length - 1]);
        }
        return m;
    }

    private static String need(Map<String, String> a, String k) {
        String v = a.get(k);
        if (v == null) {
            throw new IllegalArgumentException("--" + k + " is required");
        }
        return v;
    }

    static void json(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }

    static final class Processor implements ShardRecordProcessor {
        private final String stream;
        private final long checkpointMs;
        private String shard;
        private long lastCheckpoint;

        Processor(String stream, long checkpointMs) {
            this.stream = stream;
            this.checkpointMs = checkpointMs;
        }

        @Override
        public void initialize(InitializationInput in) {
            shard = in.shardId();
            lastCheckpoint = System.nanoTime();
            System.err.println("consume: initialize " + shard + " at " + in.extendedSequenceNumber());
        }

        @Override
        public void processRecords(ProcessRecordsInput in) {
            if (!in.records().isEmpty()) {
                StringBuilder sb = new StringBuilder(in.records().size() * 256);
                for (KinesisClientRecord r : in.records()) {
                    sb.append("{\"stream\":");
                    json(sb, stream);
                    sb.append(",\"shard\":");
                    json(sb, shard);
                    sb.append(",\"seq\":");
                    json(sb, r.sequenceNumber());
                    sb.append(",\"subseq\":").append(r.subSequenceNumber());
                    sb.append(",\"key\":");
                    json(sb, r.partitionKey());
                    if (r.approximateArrivalTimestamp() != null) {
                        sb.append(",\"ts\":").append(r.approximateArrivalTimestamp().toEpochMilli());
                    }
                    ByteBuffer d = r.data().duplicate();
                    try {
                        String text = StandardCharsets.UTF_8.newDecoder()
                                .onMalformedInput(CodingErrorAction.REPORT)
                                .onUnmappableCharacter(CodingErrorAction.REPORT)
                                .decode(d).toString();
                        sb.append(",\"data\":");
                        json(sb, text);
                    } catch (CharacterCodingException e) {
                        ByteBuffer b = r.data().duplicate();
                        byte[] raw = new byte[b.remaining()];
                        b.get(raw);
                        sb.append(",\"data_b64\":\"").append(Base64.getEncoder().encodeToString(raw)).append('"');
                    }
                    sb.append("}\n");
                }
                byte[] bytes = sb.toString().getBytes(StandardCharsets.UTF_8);
                synchronized (OUT_LOCK) {
                    try {
                        out.write(bytes);
                        out.flush();
                    } catch (Exception e) {
                        throw new IllegalStateException("stdout: " + e, e);
                    }
                }
            }
            long now = System.nanoTime();
            if (checkpointMs == 0 ? !in.records().isEmpty()
                    : now - lastCheckpoint >= checkpointMs * 1_000_000L) {
                checkpoint(in.checkpointer(), "batch");
                lastCheckpoint = now;
            }
        }

        @Override
        public void leaseLost(LeaseLostInput in) {
            System.err.println("consume: lease lost " + shard + at());
        }

        @Override
        public void shardEnded(ShardEndedInput in) {
            System.err.println("consume: shard ended " + shard + at());
            checkpoint(in.checkpointer(), "shard end");
        }

        @Override
        public void shutdownRequested(ShutdownRequestedInput in) {
            System.err.println("consume: shutdown requested " + shard + at());
            checkpoint(in.checkpointer(), "shutdown");
        }

        private void checkpoint(RecordProcessorCheckpointer c, String why) {
            try {
                c.checkpoint();
            } catch (Exception e) {
                System.err.println("consume: checkpoint (" + why + ") of " + shard + at() + ": " + e);
            }
        }

        /** " at T": CLOCK_MONOTONIC in seconds (System.nanoTime on Linux), the clock of
         *  Python's time.monotonic(), so that a test can place these lines among what it saw. */
        private static String at() {
            return String.format(" at %.3f", System.nanoTime() / 1e9);
        }
    }
}
