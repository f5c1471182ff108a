package servicebus

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsimple"
)

const cs = "Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=abc="

func TestSourceConfigDefaults(t *testing.T) {
	t.Parallel()
	s, err := (&SourceConfig{ConnConfig: ConnConfig{ConnectionString: cs}, Queue: "orders"}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	if s.maxMessages != DefaultMaxMessages || s.receiveWait != DefaultReceiveWait || s.lockRenewal != DefaultLockRenewal ||
		s.maxNackDelay != DefaultMaxNackDelay || s.guard != "scan" || s.sessions || s.entityPath != "orders" {
		t.Fatalf("defaults %+v", s)
	}
	c := s.conn
	if c.https || c.plain || c.dialHost != "myns.servicebus.windows.net" || c.dialPort != "5671" || c.namespace != "myns.servicebus.windows.net" {
		t.Fatalf("conn %+v", c)
	}
	s, err = (&SourceConfig{ConnConfig: ConnConfig{ConnectionString: cs, Transport: "https"}, Topic: "t", Subscription: "s", SubQueue: "deadletter"}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	if s.maxMessages != DefaultHTTPSReceivers || s.conn.baseURL != "https://myns.servicebus.windows.net" ||
		s.restPath != "t/subscriptions/s/$DeadLetterQueue" || s.entityPath != "t/Subscriptions/s/$DeadLetterQueue" {
		t.Fatalf("https %+v %+v", s, s.conn)
	}
	s, err = (&SourceConfig{ConnConfig: ConnConfig{ConnectionString: "Endpoint=sb://localhost:5673;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true"},
		Queue: "q", Sessions: &SessionsConfig{}}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	if !s.conn.plain || s.conn.dialPort != "5673" || !s.sessions || s.maxSessions != DefaultMaxSessions || s.sessionIdle != DefaultSessionIdle {
		t.Fatalf("emulator %+v %+v", s, s.conn)
	}
	s, err = (&SourceConfig{ConnConfig: ConnConfig{Namespace: "myns.servicebus.windows.net", Endpoint: "amqp://127.0.0.1:9999"}, Queue: "q"}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	if s.conn.cred.Kind != "default" || !s.conn.plain || s.conn.dialHost != "127.0.0.1" || s.conn.dialPort != "9999" {
		t.Fatalf("entra %+v", s.conn)
	}
}

func TestSourceConfigErrors(t *testing.T) {
	t.Parallel()
	base := func() SourceConfig { return SourceConfig{ConnConfig: ConnConfig{ConnectionString: cs}, Queue: "q"} }
	cases := []struct {
		edit func(*SourceConfig)
		want string
	}{
		{func(c *SourceConfig) { c.ConnectionString = "" }, "connection_string: required"},
		{func(c *SourceConfig) { c.Namespace = "x.servicebus.windows.net" }, "connection_string and namespace"},
		{func(c *SourceConfig) { c.ConnectionString = "Endpoint=sb://x/" }, "SharedAccessKeyName"},
		{func(c *SourceConfig) { c.ConnectionString = "garbage" }, "connection_string:"},
		{func(c *SourceConfig) { c.ConnectionString = cs + ";UseDevelopmentEmulator=maybe" }, "UseDevelopmentEmulator"},
		{func(c *SourceConfig) {
			c.ConnectionString = cs + ";SharedAccessSignature=SharedAccessSignature sr=a&sig=b&se=1"
		}, "set one"},
		{func(c *SourceConfig) { c.Credential = &CredentialConfig{} }, "credential: only used with namespace"},
		{func(c *SourceConfig) { c.ConnectionString, c.Namespace = "", "myns" }, "namespace: \"myns\": want the fully qualified name"},
		{func(c *SourceConfig) {
			c.ConnectionString, c.Namespace, c.Credential = "", "a.b.c", &CredentialConfig{Kind: "magic"}
		}, "credential.kind"},
		{func(c *SourceConfig) {
			c.ConnectionString, c.Namespace, c.Credential = "", "a.b.c", &CredentialConfig{Kind: "managed", ClientID: "x", ResourceID: "y"}
		}, "client_id and credential.resource_id"},
		{func(c *SourceConfig) {
			c.ConnectionString, c.Namespace, c.Credential = "", "a.b.c", &CredentialConfig{Kind: "environment", TenantID: "t"}
		}, "environment"},
		{func(c *SourceConfig) { c.Transport = "websocket" }, "transport"},
		{func(c *SourceConfig) { c.Endpoint = "https://x" }, "endpoint"},
		{func(c *SourceConfig) { c.Endpoint = "amqps://x/path" }, "endpoint"},
		{func(c *SourceConfig) { c.Queue = "" }, "queue: required"},
		{func(c *SourceConfig) { c.Topic = "t" }, "queue and topic"},
		{func(c *SourceConfig) { c.Queue, c.Topic = "", "t" }, "subscription: required"},
		{func(c *SourceConfig) { c.Queue, c.Subscription = "", "s" }, "topic: required"},
		{func(c *SourceConfig) { c.Queue = "a b" }, "queue:"},
		{func(c *SourceConfig) { c.Queue = "q/$DeadLetterQueue" }, "queue:"},
		{func(c *SourceConfig) { c.SubQueue = "dlq" }, "sub_queue"},
		{func(c *SourceConfig) { c.Sessions, c.Transport = &SessionsConfig{}, "https" }, "sessions: the HTTPS transport"},
		{func(c *SourceConfig) { c.Sessions, c.SubQueue = &SessionsConfig{}, "deadletter" }, "sessions: a sub-queue"},
		{func(c *SourceConfig) { c.Sessions = &SessionsConfig{MaxConcurrent: -1} }, "sessions.max_concurrent"},
		{func(c *SourceConfig) { c.Sessions = &SessionsConfig{IdleTimeout: "soon"} }, "sessions.idle_timeout"},
		{func(c *SourceConfig) { c.Sessions = &SessionsConfig{IdleTimeout: "0s"} }, "sessions.idle_timeout"},
		{func(c *SourceConfig) { c.MaxMessages = -1 }, "max_messages"},
		{func(c *SourceConfig) { c.MaxMessages, c.Transport = 100, "https" }, "max_messages"},
		{func(c *SourceConfig) { c.ReceiveWait = "1.5s"; c.Transport = "https" }, "receive_wait"},
		{func(c *SourceConfig) { c.LockRenewal = "-1s" }, "lock_renewal"},
		{func(c *SourceConfig) { c.MaxNackDelay = "-1s" }, "max_nack_delay"},
		{func(c *SourceConfig) { c.DecodeGuard = "maybe" }, "decode_guard"},
		{func(c *SourceConfig) { c.DecodeGuard, c.Transport = "full", "https" }, "decode_guard: only"},
		{func(c *SourceConfig) { c.MaxRetries = -5 }, "max_retries"},
		{func(c *SourceConfig) { c.RetryDelay = "x" }, "retry_delay"},
		{func(c *SourceConfig) { c.ConnectionString = cs + ";EntityPath=other" }, "EntityPath"},
	}
	for _, tc := range cases {
		c := base()
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", c, err, tc.want)
		}
	}
	// EntityPath stands for the queue
	c := SourceConfig{ConnConfig: ConnConfig{ConnectionString: cs + ";EntityPath=orders"}}
	if s, err := c.resolve(); err != nil || s.queue != "orders" {
		t.Fatalf("EntityPath: %v %+v", err, s)
	}
}

func TestSinkConfig(t *testing.T) {
	t.Parallel()
	s, err := (&SinkConfig{ConnConfig: ConnConfig{ConnectionString: cs}, Queue: "orders-{attr.region}"}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	if s.maxMessageSize != DefaultMaxMessageSize || s.sendTimeout != DefaultSendTimeout || s.maxSenders != DefaultMaxSenders ||
		s.entityField != "queue" || s.opt.MaxMessageSize != DefaultMaxMessageSize {
		t.Fatalf("defaults %+v", s)
	}
	base := func() SinkConfig { return SinkConfig{ConnConfig: ConnConfig{ConnectionString: cs}, Queue: "q"} }
	cases := []struct {
		edit func(*SinkConfig)
		want string
	}{
		{func(c *SinkConfig) { c.Queue = "" }, "queue: required"},
		{func(c *SinkConfig) { c.Topic = "t" }, "queue and topic"},
		{func(c *SinkConfig) { c.Queue = "q-{nope}" }, "unknown placeholder"},
		{func(c *SinkConfig) { c.DefaultSession = strings.Repeat("s", 129) }, "default_session"},
		{func(c *SinkConfig) { c.MaxMessageSize = 100 }, "max_message_size"},
		{func(c *SinkConfig) { c.MaxMessageSize, c.Transport = 2<<20, "https" }, "max_message_size: 2097152: want 1024 to 1048576 over HTTPS"},
		{func(c *SinkConfig) { c.MaxMessageSize = 200 << 20 }, "max_message_size"},
		{func(c *SinkConfig) { c.SendTimeout = "0s" }, "send_timeout"},
		{func(c *SinkConfig) { c.MaxSenders = 5000 }, "max_senders"},
	}
	for _, tc := range cases {
		c := base()
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", c, err, tc.want)
		}
	}
}

// The configuration decodes from HCL with gohcl: every tag is snake_case,
// the untagged fields (set by the config layer) are skipped.
func TestConfigHCL(t *testing.T) {
	t.Parallel()
	src := `
namespace = "myns.servicebus.windows.net"
credential {
  kind      = "workload"
  client_id = "c"
  tenant_id = "t"
}
transport    = "amqp"
queue        = "orders"
max_messages = 32
receive_wait = "30s"
lock_renewal = "5s"
sessions {
  max_concurrent = 4
  idle_timeout   = "2s"
}
`
	var c SourceConfig
	if err := hclsimple.Decode("source.hcl", []byte(src), nil, &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Credential.Kind != "workload" || c.Sessions.MaxConcurrent != 4 || c.MaxMessages != 32 {
		t.Fatalf("%+v", c)
	}
	var k SinkConfig
	if err := hclsimple.Decode("sink.hcl", []byte(`
connection_string = "`+cs+`"
topic           = "events"
default_session = "main"
max_message_size = 1048576
`), nil, &k); err != nil {
		t.Fatal(err)
	}
	if err := k.Validate(); err != nil || k.DefaultSession != "main" {
		t.Fatalf("%v %+v", err, k)
	}
	for _, typ := range []reflect.Type{reflect.TypeOf(SourceConfig{}), reflect.TypeOf(SinkConfig{}), reflect.TypeOf(ConnConfig{})} {
		for i := 0; i < typ.NumField(); i++ {
			tag := typ.Field(i).Tag.Get("hcl")
			if strings.HasPrefix(tag, "-") {
				t.Errorf("%s.%s: tag %q (gohcl reads it as an attribute)", typ.Name(), typ.Field(i).Name, tag)
			}
		}
	}
	_ = gohcl.DecodeBody
}

// toAMQP and fromAMQP copy every field both ways: a field the SDK or
// go-amqp adds would otherwise be lost silently.
func TestRawMessageConversion(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1700000000000).UTC()
	s := func(v string) *string { return &v }
	gs := uint32(3)
	m := &amqp.Message{
		Header:                &amqp.MessageHeader{Durable: true, Priority: 7, TTL: time.Minute, FirstAcquirer: true, DeliveryCount: 2},
		DeliveryAnnotations:   amqp.Annotations{"x-opt-lock-token": amqp.UUID{1}},
		Annotations:           amqp.Annotations{"x-opt-sequence-number": int64(5)},
		ApplicationProperties: map[string]any{"a": int32(1)},
		Properties: &amqp.MessageProperties{MessageID: "id", UserID: []byte("u"), To: s("to"), Subject: s("sub"), ReplyTo: s("rt"),
			CorrelationID: uint64(9), ContentType: s("ct"), ContentEncoding: s("ce"), AbsoluteExpiryTime: &now, CreationTime: &now,
			GroupID: s("g"), GroupSequence: &gs, ReplyToGroupID: s("rg")},
		Data:        [][]byte{[]byte("d")},
		Footer:      amqp.Annotations{"f": "v"},
		DeliveryTag: []byte{1, 2},
	}
	back := toAMQP(&azservicebus.AMQPAnnotatedMessage{
		ApplicationProperties: m.ApplicationProperties, Body: fromAMQP(m).Body, DeliveryAnnotations: map[any]any(m.DeliveryAnnotations),
		MessageAnnotations: map[any]any(m.Annotations), Footer: map[any]any(m.Footer), Header: fromAMQP(m).Header,
		Properties: fromAMQP(m).Properties, DeliveryTag: m.DeliveryTag,
	})
	if !reflect.DeepEqual(m, back) {
		t.Fatalf("round trip:\n%+v\n%+v", m, back)
	}
	// every exported field of the SDK's types is handled
	for _, tc := range []struct {
		typ  reflect.Type
		want int
	}{
		{reflect.TypeOf(azservicebus.AMQPAnnotatedMessage{}), 8},
		{reflect.TypeOf(azservicebus.AMQPAnnotatedMessageProperties{}), 13},
		{reflect.TypeOf(azservicebus.AMQPAnnotatedMessageHeader{}), 5},
		{reflect.TypeOf(azservicebus.AMQPAnnotatedMessageBody{}), 3},
	} {
		n := 0
		for i := 0; i < tc.typ.NumField(); i++ {
			if tc.typ.Field(i).IsExported() {
				n++
			}
		}
		if n != tc.want {
			t.Errorf("%s has %d exported fields, the conversion knows %d: update rawmsg.go", tc.typ.Name(), n, tc.want)
		}
	}
}

// A URL field written with a user part that url.Parse misreads (a password
// of digits, then an unencoded '/') is quoted redacted.
func TestURLFieldErrorsRedacted(t *testing.T) {
	t.Parallel()
	for _, c := range []ConnConfig{
		{Namespace: "myns.servicebus.windows.net", Endpoint: "amqps://u:1234/SECRETX@host:5671"},
		{Namespace: "myns.servicebus.windows.net", ManagementEndpoint: "https://u:1234/SECRETX@host"},
		{Namespace: "sb://u:1234/SECRETX@host"},
	} {
		_, err := (&SourceConfig{ConnConfig: c, Queue: "q"}).resolve()
		if err == nil || strings.Contains(err.Error(), "SECRETX") || strings.Contains(err.Error(), "1234") {
			t.Errorf("%+v: %v", c, err)
		}
	}
}
