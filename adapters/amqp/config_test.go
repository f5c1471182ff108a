package amqp

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/qbridge/qbridge/mapping"
)

func TestSourceConfigResolve(t *testing.T) {
	cfg := SourceConfig{
		ConnConfig: ConnConfig{
			URL:               "amqp://broker-a:5672",
			URLs:              []string{"amqp://broker-b:5672", "amqp://broker-c"},
			ContainerID:       "qbridge-1",
			SASL:              &SASLConfig{Mechanism: "PLAIN", Username: "u", Password: "p"},
			IdleTimeout:       "30s",
			MaxFrameSize:      131072,
			ReconnectBackoff:  "100ms",
			ReconnectBackoffM: "5s",
			CloseTimeout:      "2s",
			Hostname:          "vhost:prod",
		},
		Address:      "orders",
		Credit:       10,
		LinkName:     "qbridge-orders",
		Durable:      true,
		ExpiryPolicy: "never",
		Capabilities: []string{"topic"},
		Selector:     "color = 'red'",
		Filters: []FilterConfig{
			{Name: "jms-selector", Descriptor: "apache.org:selector-filter:string", Value: "size > 3"},
			{Name: "apache.org:no-local-filter:list", Code: "0x0000468C:0x00000003", Type: "null"},
		},
		Nack:            "release",
		RejectCondition: "x-opt:failed",
		DecodeGuard:     "full",
	}
	set, err := cfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if len(set.conn.endpoints) != 3 || set.conn.endpoints[2].port != "5672" || set.conn.endpoints[0].host != "broker-a" {
		t.Fatalf("endpoints %+v", set.conn.endpoints)
	}
	if set.credit != 10 || !set.durable || set.expiry != amqp.ExpiryPolicyNever || set.nack != nackRelease ||
		set.rejectCond != "x-opt:failed" || set.guard != guardFull || set.conn.idleTimeout != 30*time.Second ||
		set.conn.maxFrameSize != 131072 || set.conn.backoff != 100*time.Millisecond || set.conn.hostname != "vhost:prod" {
		t.Fatalf("settings %+v", set)
	}
	if len(set.filters) != 3 {
		t.Fatalf("%d filters", len(set.filters))
	}
	got := applyFilters(t, set.filters)
	want := map[string][2]any{
		"apache.org:selector-filter:string": {uint64(0x0000468C00000004), "color = 'red'"},
		"jms-selector":                      {amqp.Symbol("apache.org:selector-filter:string"), "size > 3"},
		"apache.org:no-local-filter:list":   {uint64(0x0000468C00000003), nil},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("filters\n got %#v\nwant %#v", got, want)
	}
}

// applyFilters runs go-amqp LinkFilters on a filter set (built by
// reflection: its type is internal) and returns key → {descriptor, value}.
func applyFilters(t *testing.T, fs []amqp.LinkFilter) map[string][2]any {
	t.Helper()
	setType := reflect.TypeOf(fs[0]).In(0)
	set := reflect.MakeMap(setType)
	for _, f := range fs {
		reflect.ValueOf(f).Call([]reflect.Value{set})
	}
	out := map[string][2]any{}
	iter := set.MapRange()
	for iter.Next() {
		dt := iter.Value().Elem()
		out[iter.Key().String()] = [2]any{dt.FieldByName("Descriptor").Interface(), dt.FieldByName("Value").Interface()}
	}
	return out
}

func TestSinkConfigResolve(t *testing.T) {
	no := false
	cfg := SinkConfig{
		ConnConfig: ConnConfig{
			URL: "amqps://u:p@broker:5671",
			TLS: &TLSConfig{ServerName: "broker.example", InsecureSkipVerify: true},
		},
		Address:        "/queue/{group}",
		Durable:        &no,
		MaxMessageSize: 1048576,
		SendTimeout:    "5s",
		MaxLinks:       8,
	}
	cfg.Policy = mapping.Encode
	set, err := cfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if set.durable || set.isStatic || set.maxMsgSize != 1<<20 || set.sendTimeout != 5*time.Second || set.maxLinks != 8 ||
		set.conn.tls == nil || set.conn.tls.ServerName != "broker.example" || set.opt.Policy != mapping.Encode {
		t.Fatalf("settings %+v", set)
	}
	addr, err := set.address.Execute(&mapping.Message{GroupKey: "g1"})
	if err != nil || addr != "/queue/g1" {
		t.Fatalf("address %q %v", addr, err)
	}
	// defaults
	d := SinkConfig{ConnConfig: ConnConfig{URL: "amqp://h"}, Address: "/exchange/{{x}}"}
	ds, err := d.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if !ds.durable || !ds.isStatic || ds.static != "/exchange/{x}" || ds.sendTimeout != DefaultSendTimeout || ds.maxLinks != DefaultMaxLinks {
		t.Fatalf("defaults %+v", ds)
	}
}

// TestTLSWithoutBlock: amqps:// without a tls block gets the shared TLS
// defaults (adaptercfg.TLS.Config), amqp:// none.
func TestTLSWithoutBlock(t *testing.T) {
	want, err := (&TLSConfig{}).Config()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		urls    []string
		withTLS bool
	}{
		{[]string{"amqps://h"}, true},
		{[]string{"amqp://h"}, false},
		{[]string{"amqp://a", "amqps://b"}, true},
	} {
		set, err := (&SinkConfig{ConnConfig: ConnConfig{URLs: tc.urls}, Address: "/queue/q"}).resolve()
		if err != nil {
			t.Fatalf("%s: %v", tc.urls, err)
		}
		got := set.conn.tls
		if (got != nil) != tc.withTLS || got != nil && (got.MinVersion != want.MinVersion || got.RootCAs != nil || got.InsecureSkipVerify) {
			t.Errorf("%s: tls %+v, want the shared defaults: %v", tc.urls, got, tc.withTLS)
		}
	}
}

// The configs are decoded by gohcl: every field is an optional attribute
// or a block, except the ones the config layer sets, which carry no tag at
// all (gohcl reads `hcl:"-"` as a required attribute named "-").
func TestHCLTags(t *testing.T) {
	setByCaller := map[string]bool{"Policy": true, "CarrySource": true, "Envelope": true}
	for _, v := range []any{SourceConfig{}, SinkConfig{}, SASLConfig{}, TLSConfig{}, FilterConfig{}} {
		rt := reflect.TypeOf(v)
		seen := map[string]bool{}
		fields := reflect.VisibleFields(rt)
		for _, f := range fields {
			tag, ok := f.Tag.Lookup("hcl")
			if f.Anonymous && f.Type == reflect.TypeOf(ConnConfig{}) {
				// the shared connection fields, decoded from the rest of the
				// block; VisibleFields lists them after it
				if tag != ",remain" {
					t.Errorf("%s.%s: hcl tag %q, want \",remain\"", rt.Name(), f.Name, tag)
				}
				continue
			}
			if setByCaller[f.Name] || !f.IsExported() {
				// gohcl never sees unexported fields
				if ok {
					t.Errorf("%s.%s: set by the config layer, must carry no hcl tag", rt.Name(), f.Name)
				}
				continue
			}
			name, kind, _ := strings.Cut(tag, ",")
			if !ok || name == "" || name == "-" || (kind != "optional" && kind != "block" && kind != "label") {
				t.Errorf("%s.%s: hcl tag %q", rt.Name(), f.Name, tag)
			}
			if name != strings.ToLower(name) || seen[name] {
				t.Errorf("%s.%s: name %q not snake_case or duplicated", rt.Name(), f.Name, name)
			}
			seen[name] = true
		}
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	base := func() SourceConfig { return SourceConfig{ConnConfig: ConnConfig{URL: "amqp://h"}, Address: "/queue/q"} }
	for _, tc := range []struct {
		mut  func(*SourceConfig)
		want string
	}{
		{func(c *SourceConfig) { c.URL = "" }, "url:"},
		{func(c *SourceConfig) { c.URL = "http://h" }, "url: \"http://h\": scheme"},
		{func(c *SourceConfig) { c.URLs = []string{"amqp://"} }, "urls[0]:"},
		{func(c *SourceConfig) { c.URL = "amqp://h:99999" }, "bad port"},
		{func(c *SourceConfig) { c.URL = "amqp://h/vhost" }, "hostname = \"vhost:NAME\""},
		{func(c *SourceConfig) { c.Address = "" }, "address:"},
		{func(c *SourceConfig) { c.Credit = -1 }, "credit:"},
		{func(c *SourceConfig) { c.Durable = true }, "link_name:"},
		{func(c *SourceConfig) { c.Durable, c.LinkName = true, "l" }, "container_id:"},
		{func(c *SourceConfig) { c.ExpiryPolicy = "sometimes" }, "expiry_policy:"},
		{func(c *SourceConfig) { c.ExpiryTimeout = "soon" }, "expiry_timeout:"},
		{func(c *SourceConfig) { c.Nack = "drop" }, "nack:"},
		{func(c *SourceConfig) { c.RejectCondition = "a b" }, "reject_condition:"},
		{func(c *SourceConfig) { c.DecodeGuard = "maybe" }, "decode_guard:"},
		{func(c *SourceConfig) { c.Filters = []FilterConfig{{Name: "f", Type: "int", Value: "x"}} }, `filter "f": value:`},
		{func(c *SourceConfig) { c.Filters = []FilterConfig{{Name: "f", Code: "zz"}} }, `filter "f": code:`},
		{func(c *SourceConfig) { c.Filters = []FilterConfig{{Name: "f", Code: "0x1", Descriptor: "d"}} }, "descriptor and code"},
		{func(c *SourceConfig) { c.Filters = []FilterConfig{{Name: "f", Type: "decimal"}} }, `filter "f": type:`},
		{func(c *SourceConfig) {
			c.Selector = "a"
			c.Filters = []FilterConfig{{Name: "apache.org:selector-filter:string"}}
		}, "defined twice"},
		{func(c *SourceConfig) { c.SASL = &SASLConfig{Mechanism: "GSSAPI"} }, "sasl.mechanism:"},
		{func(c *SourceConfig) { c.SASL = &SASLConfig{Mechanism: "PLAIN"} }, "sasl.username:"},
		{func(c *SourceConfig) { c.SASL = &SASLConfig{Password: "p"} }, "sasl.password:"},
		{func(c *SourceConfig) { c.SASL = &SASLConfig{Mechanism: "EXTERNAL"} }, "tls.cert_file"},
		{func(c *SourceConfig) { c.URL, c.SASL = "amqp://u:p@h", &SASLConfig{Username: "x"} }, "url: holds credentials"},
		{func(c *SourceConfig) { c.TLS = &TLSConfig{} }, "tls: set, but URL #1"},
		{func(c *SourceConfig) { c.URL, c.TLS = "amqps://h", &TLSConfig{CAFile: "/nonexistent"} }, "tls.ca_file:"},
		{func(c *SourceConfig) { c.URL, c.TLS = "amqps://h", &TLSConfig{CertFile: "/c"} }, "tls.key_file:"},
		{func(c *SourceConfig) { c.IdleTimeout = "1 minute" }, "idle_timeout:"},
		{func(c *SourceConfig) { c.MaxFrameSize = 100 }, "max_frame_size:"},
		{func(c *SourceConfig) { c.ConnectTimeout = "-1s" }, "connect_timeout:"},
		{func(c *SourceConfig) { c.ReconnectBackoff, c.ReconnectBackoffM = "10s", "1s" }, "reconnect_backoff_max:"},
		{func(c *SourceConfig) { c.CloseTimeout = "0s" }, `close_timeout: must be positive, not "0s"`},
	} {
		c := base()
		tc.mut(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want error containing %q, got %v", tc.want, err)
		}
	}
	if err := base().Validate(); err != nil {
		t.Fatal(err)
	}

	sinkBase := func() SinkConfig { return SinkConfig{ConnConfig: ConnConfig{URL: "amqp://h"}, Address: "/queue/q"} }
	for _, tc := range []struct {
		mut  func(*SinkConfig)
		want string
	}{
		{func(c *SinkConfig) { c.Address = "" }, "address:"},
		{func(c *SinkConfig) { c.Address = "/queue/{nope}" }, "address: at offset 7: unknown placeholder"},
		{func(c *SinkConfig) { c.MaxMessageSize = -1 }, "max_message_size:"},
		{func(c *SinkConfig) { c.SendTimeout = "0s" }, `send_timeout: must be positive, not "0s"`},
		{func(c *SinkConfig) { c.MaxLinks = -2 }, "max_links:"},
		{func(c *SinkConfig) { c.Policy = 9 }, "policy:"},
		{func(c *SinkConfig) { c.URLs = []string{"amqp://h2", "ftp://x"} }, "urls[1]:"},
	} {
		c := sinkBase()
		tc.mut(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sink: want error containing %q, got %v", tc.want, err)
		}
	}
}

func TestRedaction(t *testing.T) {
	ep, err := parseEndpoint("amqp://user:secret@h:1234")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ep.redacted, "secret") || !strings.Contains(ep.redacted, "user") {
		t.Fatalf("redacted %q", ep.redacted)
	}
	for _, u := range []string{"ftp://user:secret@h", "amqp://bob:p%zzsecret@h:5672", "amqp://bob:p#secret@h:5672",
		// url.Parse reads these as the host "guest:5672" and a path, a
		// query or a fragment: the password was shown whole.
		"amqp://guest:5672/secret@broker", "amqp://guest:5672?secret@broker", "amqps://guest:5672#secret@broker"} {
		// url.Parse's own error quoted the URL whole (the first two), and
		// the fragment hid the '@' (the third).
		err = SourceConfig{ConnConfig: ConnConfig{URL: u}, Address: "a"}.Validate()
		if err == nil || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "5672/") {
			t.Errorf("%s: the error leaks the password: %v", u, err)
		}
		if strings.Contains(u, "broker") && !strings.Contains(err.Error(), "@broker") {
			t.Errorf("%s: the error does not name the host: %v", u, err)
		}
	}
}

func TestSASLChoice(t *testing.T) {
	// Only checks which constructor is chosen; go-amqp's SASLType is opaque.
	ep, _ := parseEndpoint("amqp://u:p@h")
	if saslType(saslSettings{}, ep) == nil || saslType(saslSettings{mech: "NONE"}, ep) != nil {
		t.Fatal("sasl choice")
	}
}

// The smaller of max_message_size and the link's max-message-size applies:
// a max_message_size above the link's let messages over the link's limit
// through the encoder (with their envelope unshed), for go-amqp to refuse.
func TestEncodeWithinTheLinkLimit(t *testing.T) {
	num, _ := mapping.ParseValue("Number.float", "3.50") // its exact text rides in the envelope
	for _, tc := range []struct {
		name       string
		configured int
		linkMax    uint64
		want       int
	}{
		{"link smaller", 1 << 20, 4096, 4096},
		{"configured smaller", 4096, 1 << 20, 4096},
		{"no link limit", 4096, 0, 4096},
		{"nothing configured", 0, 4096, 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := SinkConfig{ConnConfig: ConnConfig{URL: "amqp://h"}, Address: "/queue/q", MaxMessageSize: tc.configured}.resolve()
			if err != nil {
				t.Fatal(err)
			}
			// Grown towards the limit, the message keeps within it: its
			// envelope is shed at the limit, never sent over it.
			m := &mapping.Message{Attributes: []mapping.Attribute{{Name: "f", Value: num}}}
			for {
				enc, err := encodeFor(&set, m, tc.linkMax)
				if err != nil {
					t.Fatalf("body %d: %v", len(m.Body), err)
				}
				b, _ := enc.MarshalBinary()
				if _, ok := enc.ApplicationProperties[mapping.EnvelopeName]; !ok {
					if len(b) > tc.want {
						t.Fatalf("encoded %d bytes, limit %d", len(b), tc.want)
					}
					break // shed at the limit, as it should be
				}
				if len(b) > tc.want {
					t.Fatalf("encoded %d bytes with the envelope, limit %d", len(b), tc.want)
				}
				m.Body = append(m.Body, make([]byte, 64)...)
			}
			m.Body = make([]byte, tc.want)
			if _, err := encodeFor(&set, m, tc.linkMax); !mapping.IsReject(err) {
				t.Fatalf("a body of the limit's size: %v, want too large", err)
			}
		})
	}
}
