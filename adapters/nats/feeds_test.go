package nats

import (
	"strings"
	"testing"
)

func TestSinkFeedsSource(t *testing.T) {
	const url = "nats://127.0.0.1:4222"
	core := func(subject string) SourceConfig {
		return SourceConfig{ConnConfig: ConnConfig{URL: url}, Subject: subject}
	}
	pub := func(subject string) SinkConfig {
		return SinkConfig{ConnConfig: ConnConfig{URL: url}, Subject: subject}
	}
	jsSrc := func(subject string, j JetStreamSourceConfig) SourceConfig {
		if j.Stream == "" {
			j.Stream = "S"
		}
		if j.Durable == "" {
			j.Durable = "d"
		}
		return SourceConfig{ConnConfig: ConnConfig{URL: url}, Subject: subject, JetStream: &j}
	}
	jsPub := func(subject string, j JetStreamSinkConfig) SinkConfig {
		s := pub(subject)
		s.JetStream = &j
		return s
	}
	withConn := func(s SinkConfig, c ConnConfig) SinkConfig { s.ConnConfig = c; return s }
	embedded := func(dir string, port int) ConnConfig {
		return ConnConfig{Embedded: true, StoreDir: dir, Port: port}
	}
	dir := t.TempDir()
	one, two := 1, 2

	tests := []struct {
		name  string
		src   SourceConfig
		sink  SinkConfig
		loops bool
		why   string // a substring of why when it loops
	}{
		// core source
		{"same subject", core("l.in"), pub("l.in"), true, `publishes to subject "l.in" on 127.0.0.1:4222, which the source's subscription to "l.in"`},
		{"different subject", core("l.in"), pub("l.out"), false, ""},
		{"star matches", core("l.*"), pub("l.in"), true, `subscription to "l.*"`},
		{"full wildcard matches", core("l.>"), pub("l.in.x"), true, ""},
		{"star does not match two tokens", core("l.*"), pub("l.in.x"), false, ""},
		{"full wildcard needs a token", core("l.>"), pub("l"), false, ""},
		{"wildcard elsewhere", core("*.in"), pub("m.out"), false, ""},
		{"prefix is not a match", core("l.in"), pub("l.inx"), false, ""},
		{"templated subject", core("l.>"), pub("l.{group}"), false, ""},
		{"escaped braces are literal", core("l.>"), pub("l.{{x}}"), true, `"l.{x}"`},
		{"JetStream publish seen by a core subscription", core("l.in"), jsPub("l.in", JetStreamSinkConfig{}), true, ""},
		{"queue group", SourceConfig{ConnConfig: ConnConfig{URL: url}, Subject: "l.in", QueueGroup: "q"}, pub("l.in"), true, ""},

		// which server
		{"different host", core("l.in"), withConn(pub("l.in"), ConnConfig{URL: "nats://127.0.0.2:4222"}), false, ""},
		{"different port", core("l.in"), withConn(pub("l.in"), ConnConfig{URL: "nats://127.0.0.1:4223"}), false, ""},
		{"default port and case", core("l.in"), withConn(pub("l.in"), ConnConfig{URL: "NATS://127.0.0.1"}), true, ""},
		{"no scheme", core("l.in"), withConn(pub("l.in"), ConnConfig{URL: "127.0.0.1:4222"}), true, ""},
		{"tls scheme, same listener", core("l.in"), withConn(pub("l.in"), ConnConfig{URL: "tls://127.0.0.1:4222"}), true, ""},
		{"localhost is not normalized", core("l.in"), withConn(pub("l.in"), ConnConfig{URL: "nats://localhost:4222"}), false, ""},
		{"same URL list in another order", SourceConfig{ConnConfig: ConnConfig{URL: "nats://a:4222,nats://b:4222"}, Subject: "x"},
			withConn(pub("x"), ConnConfig{URL: "nats://b:4222, nats://a:4222"}), true, ""},
		{"overlapping URL lists", SourceConfig{ConnConfig: ConnConfig{URL: "nats://a:4222,nats://b:4222"}, Subject: "x"},
			withConn(pub("x"), ConnConfig{URL: "nats://a:4222"}), false, ""},
		{"other user (maybe another account)", core("l.in"), withConn(pub("l.in"), ConnConfig{URL: url, User: "u", Password: "p"}), false, ""},
		{"same user", SourceConfig{ConnConfig: ConnConfig{URL: url, User: "u", Password: "p"}, Subject: "l.in"},
			withConn(pub("l.in"), ConnConfig{URL: url, User: "u", Password: "p"}), true, ""},
		{"other URL user", core("l.in"), withConn(pub("l.in"), ConnConfig{URL: "nats://tok@127.0.0.1:4222"}), false, ""},
		{"other creds file", SourceConfig{ConnConfig: ConnConfig{URL: url, CredsFile: "a.creds"}, Subject: "l.in"},
			withConn(pub("l.in"), ConnConfig{URL: url, CredsFile: "b.creds"}), false, ""},
		{"both embedded, same store", SourceConfig{ConnConfig: embedded(dir, 4222), Subject: "l.in"},
			withConn(pub("l.in"), embedded(dir, 4222)), true, "the embedded server (store_dir " + dir},
		{"both embedded, one port implied", SourceConfig{ConnConfig: embedded(dir, 4222), Subject: "l.in"},
			withConn(pub("l.in"), embedded(dir, 0)), true, ""},
		{"both embedded, other store", SourceConfig{ConnConfig: embedded(dir, 4222), Subject: "l.in"},
			withConn(pub("l.in"), embedded(dir+"/other", 4222)), false, ""},
		{"both embedded, other ports", SourceConfig{ConnConfig: embedded(dir, 4222), Subject: "l.in"},
			withConn(pub("l.in"), embedded(dir, 4223)), false, ""},
		{"embedded and URL", SourceConfig{ConnConfig: embedded(dir, 4222), Subject: "l.in"}, pub("l.in"), false, ""},

		// JetStream source
		{"stream created on the subject", jsSrc("l.in", JetStreamSourceConfig{CreateStream: true}), pub("l.in"), true,
			`which stream "S" (subjects ["l.in"]) stores and the source's consumer "d" (filter ["l.in"]) reads`},
		{"stream created, JetStream publish", jsSrc("l.in", JetStreamSourceConfig{CreateStream: true}), jsPub("l.in", JetStreamSinkConfig{Stream: "OUT"}), true, ""},
		{"stream created, other subject", jsSrc("l.in", JetStreamSourceConfig{CreateStream: true}), pub("l.out"), false, ""},
		{"stream subjects capture, filter does not", jsSrc("", JetStreamSourceConfig{CreateStream: true, StreamSubjects: []string{"l.>"}, FilterSubjects: []string{"l.a"}}), pub("l.b"), false, ""},
		{"stream subjects and filter capture", jsSrc("", JetStreamSourceConfig{CreateStream: true, StreamSubjects: []string{"l.>"}, FilterSubjects: []string{"x", "l.*"}}), pub("l.b"), true, `filter ["x", "l.*"]`},
		{"no filter reads the whole stream", jsSrc("", JetStreamSourceConfig{CreateStream: true, StreamSubjects: []string{"l.>"}}), pub("l.b.c"), true, "every subject of the stream"},
		{"existing stream, subjects unknown", jsSrc("l.in", JetStreamSourceConfig{}), pub("l.in"), false, ""},
		{"existing stream, filter only", jsSrc("", JetStreamSourceConfig{FilterSubjects: []string{"l.>"}}), pub("l.in"), false, ""},
		{"sink creates the source's stream", jsSrc("l.in", JetStreamSourceConfig{}), jsPub("l.in", JetStreamSinkConfig{Stream: "S", CreateStream: true}), true, ""},
		{"sink creates another stream", jsSrc("l.in", JetStreamSourceConfig{}), jsPub("l.in", JetStreamSinkConfig{Stream: "T", CreateStream: true}), false, ""},
		{"both create, subjects disagree", jsSrc("", JetStreamSourceConfig{CreateStream: true, StreamSubjects: []string{"a.>"}}),
			jsPub("l.in", JetStreamSinkConfig{Stream: "S", CreateStream: true}), false, ""},
		{"partitioned stream", jsSrc("", JetStreamSourceConfig{Durable: "d-{partition}", CreateStream: true, FilterSubjects: []string{"o.{partition}.*"}, Partitions: 4, Partition: &one}),
			pub("o.1.x"), false, ""},
		{"partitioned stream, stored subject", jsSrc("", JetStreamSourceConfig{Durable: "d-{partition}", CreateStream: true, FilterSubjects: []string{"o.{partition}.*"}, Partitions: 4, Partition: &two}),
			pub("o.x"), false, ""},
		{"invalid source", SourceConfig{Subject: "l.in"}, pub("l.in"), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A near miss must be a valid configuration, or it proves nothing.
			if err := tt.src.Validate(); err != nil && tt.name != "invalid source" {
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
			if loops && strings.Contains(why, "nats://") {
				t.Errorf("why shows a URL as configured (it could hold credentials): %s", why)
			}
		})
	}
}
