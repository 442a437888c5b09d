package software.amazon.kinesis.common;

import software.amazon.awssdk.http.Protocol;
import software.amazon.awssdk.http.nio.netty.NettyNioAsyncHttpClient;
import software.amazon.awssdk.services.kinesis.KinesisAsyncClient;
import software.amazon.awssdk.services.kinesis.KinesisAsyncClientBuilder;

/**
 * Lab shim (test code, never product), first on the MultiLangDaemon's class path in place of the
 * KCL's class of the same name: the same API, but an HTTP/1.1 Netty client. The KCL's own makes
 * an HTTP/2 client, which kinesalite and kinesis-local's plain port cannot speak ("First received
 * frame was not SETTINGS"), and the MultiLangDaemon's properties have no setting for it.
 */
public class KinesisClientUtil {
    public static KinesisAsyncClient createKinesisAsyncClient(KinesisAsyncClientBuilder builder) {
        return adjustKinesisClientBuilder(builder).build();
    }

    public static KinesisAsyncClientBuilder adjustKinesisClientBuilder(KinesisAsyncClientBuilder builder) {
        return builder.httpClientBuilder(NettyNioAsyncHttpClient.builder()
                .maxConcurrency(Integer.MAX_VALUE)
                .protocol(Protocol.HTTP1_1));
    }
}
