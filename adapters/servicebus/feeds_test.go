package servicebus

import (
	"strings"
	"testing"
)

func TestSinkFeedsSource(t *testing.T) {
	const cs = "Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=secret"
	conn := ConnConfig{ConnectionString: cs}
	queue := func(c ConnConfig, q string) SourceConfig { return SourceConfig{ConnConfig: c, Queue: q} }
	toQueue := func(c ConnConfig, q string) SinkConfig { return SinkConfig{ConnConfig: c, Queue: q} }
	toTopic := func(c ConnConfig, tp string) SinkConfig { return SinkConfig{ConnConfig: c, Topic: tp} }
	tests := []struct {
		name  string
		src   SourceConfig
		sink  SinkConfig
		loops bool
		why   string
	}{
		{"same queue", queue(conn, "orders"), toQueue(conn, "orders"), true, `sends to queue "orders" in namespace myns.servicebus.windows.net, the queue the source receives from`},
		{"other queue", queue(conn, "orders"), toQueue(conn, "orders-out"), false, ""},
		{"queue name case not normalized", queue(conn, "orders"), toQueue(conn, "Orders"), false, ""},
		{"templated queue", queue(conn, "orders"), toQueue(conn, "{attr.q}"), false, ""},
		{"sent by name as a topic", queue(conn, "orders"), toTopic(conn, "orders"), true, `sends to topic "orders"`},
		{"sessions", SourceConfig{ConnConfig: conn, Queue: "orders", Sessions: &SessionsConfig{}}, toQueue(conn, "orders"), true, ""},
		{"entity path", queue(ConnConfig{ConnectionString: cs + ";EntityPath=orders"}, ""), toQueue(ConnConfig{ConnectionString: cs + ";EntityPath=orders"}, ""), true, ""},
		{"other key, same namespace", queue(conn, "orders"),
			toQueue(ConnConfig{ConnectionString: "Endpoint=sb://MYNS.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=other"}, "orders"), true, ""},
		{"Entra ID and connection string, same namespace", queue(ConnConfig{Namespace: "myns.servicebus.windows.net"}, "orders"), toQueue(conn, "orders"), true, ""},
		{"HTTPS and AMQP, same namespace", queue(ConnConfig{ConnectionString: cs, Transport: "https"}, "orders"), toQueue(conn, "orders"), true, ""},
		{"other namespace", queue(conn, "orders"), toQueue(ConnConfig{Namespace: "otherns.servicebus.windows.net"}, "orders"), false, ""},
		{"endpoint on one side", queue(conn, "orders"), toQueue(ConnConfig{ConnectionString: cs, Endpoint: "amqp://127.0.0.1:5672"}, "orders"), false, ""},
		{"other endpoints", queue(ConnConfig{ConnectionString: cs, Endpoint: "amqp://127.0.0.1:5672"}, "orders"),
			toQueue(ConnConfig{ConnectionString: cs, Endpoint: "amqp://127.0.0.1:5673"}, "orders"), false, ""},
		{"same endpoint", queue(ConnConfig{ConnectionString: cs, Endpoint: "amqp://127.0.0.1:5672"}, "orders"),
			toQueue(ConnConfig{ConnectionString: cs, Endpoint: "amqp://127.0.0.1:5672/"}, "orders"), true, "through 127.0.0.1:5672"},
		{"emulator", queue(ConnConfig{ConnectionString: "Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=s;UseDevelopmentEmulator=true"}, "q"),
			toQueue(ConnConfig{ConnectionString: "Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=s;UseDevelopmentEmulator=true"}, "q"), true, ""},
		{"emulators on other ports", queue(ConnConfig{ConnectionString: "Endpoint=sb://localhost:5672;SharedAccessKeyName=k;SharedAccessKey=s;UseDevelopmentEmulator=true"}, "q"),
			toQueue(ConnConfig{ConnectionString: "Endpoint=sb://localhost:5673;SharedAccessKeyName=k;SharedAccessKey=s;UseDevelopmentEmulator=true"}, "q"), false, ""},
		// A subscription's rules may not take what the sink sends to its topic.
		{"subscription of the sink's topic", SourceConfig{ConnConfig: conn, Topic: "events", Subscription: "s"}, toTopic(conn, "events"), false, ""},
		{"dead-letter sub-queue", SourceConfig{ConnConfig: conn, Queue: "orders", SubQueue: "deadletter"}, toQueue(conn, "orders"), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.src.Validate(); err != nil {
				t.Fatalf("source: %v", err)
			}
			if err := tt.sink.Validate(); err != nil {
				t.Fatalf("sink: %v", err)
			}
			why, loops := SinkFeedsSource(tt.src, tt.sink)
			if loops != tt.loops {
				t.Fatalf("loops = %v (%s), want %v", loops, why, tt.loops)
			}
			if loops && !strings.Contains(why, tt.why) {
				t.Errorf("why = %s\nwant it to contain %s", why, tt.why)
			}
			if strings.Contains(why, "secret") || strings.Contains(why, "SharedAccess") {
				t.Errorf("why shows credentials: %s", why)
			}
		})
	}
	if _, loops := SinkFeedsSource(SourceConfig{Queue: "orders"}, toQueue(conn, "orders")); loops {
		t.Error("an invalid source loops")
	}
}
