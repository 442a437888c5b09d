package dev.libkinesis.lab;

import com.google.common.util.concurrent.FutureCallback;
import com.google.common.util.concurrent.Futures;
import com.google.common.util.concurrent.MoreExecutors;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.kinesis.producer.KinesisProducer;
import software.amazon.kinesis.producer.KinesisProducerConfiguration;
import software.amazon.kinesis.producer.UserRecordResult;

/**
 * The KPL fed from stdin, for the lab (test code, never product): one user record per line,
 * the partition key before the first --key-delim (default: a tab) or, without one on the line, a
 * counter. The KPL's native daemon speaks only HTTPS: --kinesis must be an https URL (the
 * certificate is not verified).  At the end prints one JSON line on stdout: records sent, failed,
 * and the KPL's attempts.
 *
 * <pre>
 * java -cp 'target/classes:target/lib/*' dev.libkinesis.lab.Produce --stream S
 *      --kinesis https://127.0.0.1:PORT [--aggregate true] [--rate-limit 150]
 *      [--buffered-ms 100] [--key-delim TAB] [--log-level warning]
 * </pre>
 */
public final class Produce {
    private Produce() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            a.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        String stream = a.get("stream");
        URI kinesis = URI.create(a.get("kinesis"));
        if (stream == null || !"https".equals(kinesis.getScheme())) {
            System.err.println("produce: --stream S --kinesis https://HOST:PORT are required");
            System.exit(2);
        }
        String delim = a.getOrDefault("key-delim", "\t");
        KinesisProducerConfiguration c = new KinesisProducerConfiguration()
                .setRegion(a.getOrDefault("region", "us-east-1"))
                .setKinesisEndpoint(kinesis.getHost())
                .setKinesisPort(kinesis.getPort())
                .setCloudwatchEndpoint(kinesis.getHost())
                .setCloudwatchPort(kinesis.getPort())
                .setStsEndpoint(kinesis.getHost())
                .setStsPort(kinesis.getPort())
                .setVerifyCertificate(false)
                .setMetricsLevel("none")
                .setLogLevel(a.getOrDefault("log-level", "warning"))
                .setAggregationEnabled(Boolean.parseBoolean(a.getOrDefault("aggregate", "true")))
                .setRateLimit(Long.parseLong(a.getOrDefault("rate-limit", "150")))
                .setRecordMaxBufferedTime(Long.parseLong(a.getOrDefault("buffered-ms", "100")))
                .setCredentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create("test", "test")));
        KinesisProducer kp = new KinesisProducer(c);
        AtomicLong ok = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        AtomicLong attempts = new AtomicLong();
        FutureCallback<UserRecordResult> cb = new FutureCallback<>() {
            @Override
            public void onSuccess(UserRecordResult r) {
                ok.incrementAndGet();
                attempts.addAndGet(r.getAttempts().size());
            }

            @Override
            public void onFailure(Throwable t) {
                failed.incrementAndGet();
            }
        };
        long n = 0;
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16)) {
            String line;
            while ((line = in.readLine()) != null) {
                int at = line.indexOf(delim);
                String key = at >= 0 ? line.substring(0, at) : Long.toString(n);
                String data = at >= 0 ? line.substring(at + delim.length()) : line;
                while (kp.getOutstandingRecordsCount() > 20000) {
                    Thread.sleep(1);
                }
                Futures.addCallback(kp.addUserRecord(stream, key,
                        ByteBuffer.wrap(data.getBytes(StandardCharsets.UTF_8))), cb, MoreExecutors.directExecutor());
                n++;
            }
        }
        kp.flushSync();
        kp.destroy();
        System.out.println("{\"records\":" + n + ",\"ok\":" + ok.get() + ",\"failed\":" + failed.get()
                + ",\"attempts\":" + attempts.get() + "}");
        System.exit(failed.get() == 0 && ok.get() == n ? 0 : 5);
    }
}
