// Starts Amazon DynamoDB Local bound to 127.0.0.1 only. DynamoDB Local's own
// command line has no bind address (its Jetty server listens on every
// interface); this launcher builds the server from the same arguments and
// sets the host of its one connector before starting it. Run in Java's
// source-file mode (no build step), see infra/local/start-dynamodb.sh:
//
//   java -cp 'DynamoDBLocal.jar:DynamoDBLocal_lib/*' \
//        -Djava.library.path=DynamoDBLocal_lib \
//        LoopbackDynamoDBLocal.java -inMemory -sharedDb -disableTelemetry -port P
import java.lang.reflect.Field;

import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public class LoopbackDynamoDBLocal {
    public static void main(String[] args) throws Exception {
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server server = (Server) field.get(proxy);
        for (Connector connector : server.getConnectors()) {
            ((ServerConnector) connector).setHost("127.0.0.1");
        }
        proxy.start();
        proxy.join();
    }
}
