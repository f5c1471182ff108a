package amqp

import (
	"strings"
	"testing"
)

func TestSinkFeedsSource(t *testing.T) {
	const url = "amqp://guest:guest@127.0.0.1:5672"
	src := func(address string) SourceConfig {
		return SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: address}
	}
	dst := func(address string) SinkConfig {
		return SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: address}
	}
	with := func(s SourceConfig, mod func(*SourceConfig)) SourceConfig { mod(&s); return s }
	withSink := func(s SinkConfig, mod func(*SinkConfig)) SinkConfig { mod(&s); return s }
	tests := []struct {
		name  string
		src   SourceConfig
		sink  SinkConfig
		loops bool
		why   string
	}{
		{"same queue", src("/queue/orders"), dst("/queue/orders"), true, `sends to address "/queue/orders" on 127.0.0.1:5672, the address the source receives from there`},
		{"other queue", src("/queue/orders"), dst("/queue/orders-dlq"), false, ""},
		{"other spelling of the node", src("/queue/orders"), dst("/queues/orders"), false, ""},
		{"templated address", src("/queue/orders"), dst("/queue/{group}"), false, ""},
		{"escaped braces are literal", src("/queue/{x}"), dst("/queue/{{x}}"), true, ""},
		{"other credentials, same broker", src("orders"), withSink(dst("orders"), func(c *SinkConfig) { c.URL = "amqp://other:pw@127.0.0.1:5672" }), true, ""},
		{"default port, host case", src("orders"), withSink(dst("orders"), func(c *SinkConfig) { c.URL = "amqp://LocalHost" }),
			false, ""}, // 127.0.0.1 and localhost are not taken as the same
		{"default port made explicit", with(src("orders"), func(c *SourceConfig) { c.URL = "amqp://Broker" }),
			withSink(dst("orders"), func(c *SinkConfig) { c.URL = "amqp://broker:5672" }), true, "broker:5672"},
		{"other port", src("orders"), withSink(dst("orders"), func(c *SinkConfig) { c.URL = "amqp://127.0.0.1:5673" }), false, ""},
		{"other host", src("orders"), withSink(dst("orders"), func(c *SinkConfig) { c.URL = "amqp://127.0.0.2:5672" }), false, ""},
		{"same fail-over set", with(src("orders"), func(c *SourceConfig) { c.URL, c.URLs = "", []string{"amqp://a", "amqp://b"} }),
			withSink(dst("orders"), func(c *SinkConfig) { c.URL, c.URLs = "amqp://b", []string{"amqp://a:5672"} }), true, "a:5672, b:5672"},
		{"overlapping fail-over sets", with(src("orders"), func(c *SourceConfig) { c.URL, c.URLs = "", []string{"amqp://a", "amqp://b"} }),
			withSink(dst("orders"), func(c *SinkConfig) { c.URL = "amqp://a" }), false, ""},
		{"same vhost", with(src("orders"), func(c *SourceConfig) { c.Hostname = "vhost:prod" }),
			withSink(dst("orders"), func(c *SinkConfig) { c.Hostname = "vhost:prod" }), true, `(hostname "vhost:prod")`},
		{"other vhost", with(src("orders"), func(c *SourceConfig) { c.Hostname = "vhost:prod" }),
			withSink(dst("orders"), func(c *SinkConfig) { c.Hostname = "vhost:test" }), false, ""},
		{"vhost on one side", with(src("orders"), func(c *SourceConfig) { c.Hostname = "vhost:/" }), dst("orders"), false, ""},
		{"selector", with(src("orders"), func(c *SourceConfig) { c.Selector = "stage = 'new'" }), dst("orders"), false, ""},
		{"filter", with(src("orders"), func(c *SourceConfig) { c.Filters = []FilterConfig{{Name: "f", Value: "x"}} }), dst("orders"), false, ""},
		{"topic capability", with(src("orders"), func(c *SourceConfig) { c.Capabilities = []string{"topic"} }), dst("orders"), false, ""},
		{"queue capability", with(src("orders"), func(c *SourceConfig) { c.Capabilities = []string{"queue"} }), dst("orders"), true, ""},
		{"durable subscription", with(src("/queue/orders"), func(c *SourceConfig) {
			c.Durable, c.LinkName, c.ContainerID = true, "l", "c"
		}), dst("/queue/orders"), true, ""},
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
			if strings.Contains(why, "guest") || strings.Contains(why, "pw") {
				t.Errorf("why shows credentials: %s", why)
			}
		})
	}
	if _, loops := SinkFeedsSource(SourceConfig{Address: "orders"}, dst("orders")); loops {
		t.Error("an invalid source loops")
	}
}
