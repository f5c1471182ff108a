package nats

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

func TestSourceConfigValidate(t *testing.T) {
	js := func(mod func(*JetStreamSourceConfig)) *JetStreamSourceConfig {
		j := &JetStreamSourceConfig{Stream: "S", Durable: "d"}
		if mod != nil {
			mod(j)
		}
		return j
	}
	tests := []struct {
		name string
		cfg  SourceConfig
		err  string // "" valid; else a substring (the field name)
	}{
		{"core", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h:4222"}, Subject: "a.*"}, ""},
		{"core queue", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a.>", QueueGroup: "q"}, ""},
		{"no url", SourceConfig{Subject: "a"}, "url: required"},
		// Refused here, not at every connect with the password in the error.
		{"url with an unencoded # in the password", SourceConfig{ConnConfig: ConnConfig{URL: "nats://alice:p#SECRETX@h:4222"}, Subject: "a"}, `url: "nats://xxxxx@h:4222": `},
		{"second url unparsable", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h:4222, nats://bob:p%zzSECRETX@h2:4222"}, Subject: "a"}, "percent-encoded"},
		{"urls without scheme", SourceConfig{ConnConfig: ConnConfig{URL: "h:4222,h2:4222"}, Subject: "a"}, ""},
		// nats.go reads "nats//h:4222" as host "nats" with a path, and dialled
		// that for ever; a path is never used.
		{"url missing the colon after the scheme", SourceConfig{ConnConfig: ConnConfig{URL: "nats//127.0.0.1:4222"}, Subject: "a"}, "a path is not used"},
		{"url with a path", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h:4222, nats://h2:4222/x"}, Subject: "a"}, `url: "nats://h2:4222/x": a path`},
		{"url with a path, as written", SourceConfig{ConnConfig: ConnConfig{URL: "nats//u:SECRETX@127.0.0.1:4222"}, Subject: "a"}, `url: "nats//xxxxx@127.0.0.1:4222": a path`},
		{"websocket url with a path", SourceConfig{ConnConfig: ConnConfig{URL: "wss://h:443/nats"}, Subject: "a"}, ""},
		{"url with a trailing slash", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h:4222/"}, Subject: "a"}, ""},
		{"url without a host", SourceConfig{ConnConfig: ConnConfig{URL: "nats:///x"}, Subject: "a"}, "no host"},
		// A password of digits, then an unencoded / ? or #: url.Parse reads
		// host:port and a path, query or fragment, and the message showed it.
		{"url with an unencoded / after digits", SourceConfig{ConnConfig: ConnConfig{URL: "nats://u:1234/SECRETX@h:4222"}, Subject: "a"}, `url: "nats://xxxxx@h:4222": not a valid URL`},
		{"url with an unencoded ? after digits", SourceConfig{ConnConfig: ConnConfig{URL: "nats://u:1234?SECRETX@h:4222"}, Subject: "a"}, `url: "nats://xxxxx@h:4222": not a valid URL`},
		{"url with an unencoded # after digits", SourceConfig{ConnConfig: ConnConfig{URL: "h0:4222, u:1234#SECRETX@h:4222"}, Subject: "a"}, `url: "nats://xxxxx@h:4222": not a valid URL`},
		{"token with an unencoded /", SourceConfig{ConnConfig: ConnConfig{URL: "nats://tok123/SECRETX@h"}, Subject: "a"}, `url: "nats://xxxxx@h": not a valid URL`},
		{"url list with an empty entry", SourceConfig{ConnConfig: ConnConfig{URL: "nats://u:SECRETX@h:4222, "}, Subject: "a"}, `url: "nats://u:xxxxx@h:4222,": an empty server URL`},
		{"websocket url", SourceConfig{ConnConfig: ConnConfig{URL: "ws://u:p@h:80, wss://h"}, Subject: "a"}, ""},
		{"core no subject", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}}, "subject: required"},
		{"bad subject", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a..b"}, "subject:"},
		{"bad wildcard", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a.>.b"}, "subject:"},
		{"negative buffer", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a", BufferSize: -1}, "buffer_size"},
		{"group token too far", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a.*", GroupFromSubjectToken: 3}, "group_from_subject_token"},
		{"group token negative", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a.*", GroupFromSubjectToken: -1}, "group_from_subject_token"},
		{"group token with >", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a.>", GroupFromSubjectToken: 5}, ""},
		{"bad group header", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a", GroupHeader: "a b"}, "group_header"},
		{"user without password", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h", User: "u"}, Subject: "a"}, "user:"},
		{"two auth methods", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h", Token: "t", CredsFile: "c"}, Subject: "a"}, "at most one"},
		{"bad duration", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h", ReconnectWait: "soon"}, Subject: "a"}, "reconnect_wait"},
		{"tls half cert", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h", TLS: &TLSConfig{CertFile: "c"}}, Subject: "a"}, "tls.cert_file"},
		{"port without embedded", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h", Port: 4222}, Subject: "a"}, "port:"},
		{"store_dir without embedded", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h", StoreDir: "/x"}, Subject: "a"}, "store_dir:"},
		{"embedded", SourceConfig{ConnConfig: ConnConfig{Embedded: true, StoreDir: "/tmp/x", Port: 4222}, Subject: "a"}, ""},
		{"embedded with url", SourceConfig{ConnConfig: ConnConfig{Embedded: true, URL: "nats://h"}, Subject: "a"}, "url: must be empty"},
		{"embedded with tls", SourceConfig{ConnConfig: ConnConfig{Embedded: true, TLS: &TLSConfig{}}, Subject: "a"}, "tls:"},
		{"embedded with creds", SourceConfig{ConnConfig: ConnConfig{Embedded: true, CredsFile: "x"}, Subject: "a"}, "creds_file"},
		{"embedded bad port", SourceConfig{ConnConfig: ConnConfig{Embedded: true, Port: 70000}, Subject: "a"}, "port:"},
		{"js", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: js(nil)}, ""},
		{"js consumer alias", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: js(func(j *JetStreamSourceConfig) { j.Durable, j.Consumer = "", "c" })}, ""},
		{"js durable and consumer", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: js(func(j *JetStreamSourceConfig) { j.Consumer = "c" })}, "jetstream.durable and jetstream.consumer"},
		{"js no stream", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: js(func(j *JetStreamSourceConfig) { j.Stream = "" })}, "jetstream.stream: required"},
		{"js bad stream", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: js(func(j *JetStreamSourceConfig) { j.Stream = "a.b" })}, "jetstream.stream"},
		{"js no durable", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: js(func(j *JetStreamSourceConfig) { j.Durable = "" })}, "jetstream.durable: required"},
		{"js ack_wait", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: js(func(j *JetStreamSourceConfig) { j.AckWait = "-1s" })}, "jetstream.ack_wait"},
		{"js fetch_wait", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: js(func(j *JetStreamSourceConfig) { j.FetchWait = "x" })}, "jetstream.fetch_wait"},
		{"js max_deliver", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: js(func(j *JetStreamSourceConfig) { j.MaxDeliver = -2 })}, "jetstream.max_deliver"},
		{"js max_ack_pending", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: js(func(j *JetStreamSourceConfig) { j.MaxAckPending = -5 })}, "jetstream.max_ack_pending"},
		{"js fetch_batch", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: js(func(j *JetStreamSourceConfig) { j.FetchBatch = -1 })}, "jetstream.fetch_batch"},
		{"js bad filter", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: js(func(j *JetStreamSourceConfig) { j.FilterSubjects = []string{"a", ""} })}, "jetstream.filter_subjects[1]"},
		{"js queue", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, QueueGroup: "q", JetStream: js(nil)}, "queue_group"},
		{"js create without subjects", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: js(func(j *JetStreamSourceConfig) { j.CreateStream = true })}, "jetstream.stream_subjects"},
		{"js create from subject", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a.>", JetStream: js(func(j *JetStreamSourceConfig) { j.CreateStream = true })}, ""},
		{"js stream_subjects without create", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: js(func(j *JetStreamSourceConfig) { j.StreamSubjects = []string{"a"} })}, "jetstream.stream_subjects"},
		{"js create and bind", SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a", JetStream: js(func(j *JetStreamSourceConfig) { j.CreateStream, j.Bind = true, true })}, "jetstream.create_stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("Validate = %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("Validate = %v, want an error containing %q", err, tt.err)
			case err != nil && strings.Contains(err.Error(), "SECRETX"):
				t.Errorf("Validate = %v: shows the password", err)
			}
		})
	}
}

func TestRedactURLHidesTokens(t *testing.T) {
	got := redactURL("nats://TOKEN1@h:4222, nats://u:PASS2@h2:4222, nats://u:1234/PASS3@h3")
	if strings.Contains(got, "TOKEN1") || strings.Contains(got, "PASS") || got != "nats://xxxxx@h:4222,nats://u:xxxxx@h2:4222,nats://xxxxx@h3" {
		t.Errorf("redactURL = %q", got)
	}
}

// The configuration's check and the servers' identities read a URL list
// by one set of rules (serverURLs).
func TestServerURLs(t *testing.T) {
	for _, tc := range []struct{ list, hosts, users string }{
		{"nats://h", "h:4222", ""},
		{" H:4222 ,tls://u:p@h2, ws://tok@h3, wss://h4/nats ", "h2:4222,h3:80,h4:443,h:4222", ",tok,u"},
		{"nats://[::1]", "[::1]:4222", ""},
	} {
		if _, err := serverURLs(tc.list); err != nil {
			t.Errorf("serverURLs(%q): %v", tc.list, err)
		}
		id, ok := serverIdentity(connConfig{URL: tc.list})
		if parts := strings.Split(id.key, "\x00"); !ok || len(parts) < 2 || parts[0] != tc.hosts || parts[1] != tc.users {
			t.Errorf("serverIdentity(%q) = %q, %v", tc.list, id.key, ok)
		}
	}
	for _, list := range []string{"", "nats://h,", "nats://h,,nats://h2", "nats://u:1234/SECRETX@h", "nats//h", "nats://h/x"} {
		if _, err := serverURLs(list); err == nil {
			t.Errorf("serverURLs(%q): no error", list)
		}
		if _, ok := serverIdentity(connConfig{URL: list}); ok {
			t.Errorf("serverIdentity(%q): ok, which the configuration refuses", list)
		}
	}
}

func TestSinkConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  SinkConfig
		err  string
	}{
		{"core", SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a.{group}"}, ""},
		{"no subject", SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}}, "subject: required"},
		{"bad template", SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a.{nope}"}, "subject:"},
		{"wildcard", SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a.*"}, "subject:"},
		{"bad default token", SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a", DefaultGroupToken: "a.b"}, "default_group_token"},
		{"bad policy", SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a", Policy: 9}, "policy"},
		{"js", SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a", JetStream: &JetStreamSinkConfig{}}, ""},
		{"js create needs stream", SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a", JetStream: &JetStreamSinkConfig{CreateStream: true}}, "jetstream.stream: required"},
		{"js create derives subjects", SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a.{group}", JetStream: &JetStreamSinkConfig{Stream: "S", CreateStream: true}}, ""},
		{"js create cannot derive", SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "{subject}.x", JetStream: &JetStreamSinkConfig{Stream: "S", CreateStream: true}}, "jetstream.stream_subjects"},
		{"js window without create", SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a", JetStream: &JetStreamSinkConfig{DuplicateWindow: "1m"}}, "duplicate_window"},
		{"js ack_timeout", SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a", JetStream: &JetStreamSinkConfig{AckTimeout: "0s"}}, "jetstream.ack_timeout"},
		{"js max_pending", SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a", JetStream: &JetStreamSinkConfig{MaxPending: -1}}, "jetstream.max_pending"},
		{"embedded", SinkConfig{ConnConfig: ConnConfig{Embedded: true}, Subject: "a"}, ""},
		{"token and user", SinkConfig{ConnConfig: ConnConfig{URL: "nats://h", Token: "t", User: "u", Password: "p"}, Subject: "a"}, "at most one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("Validate = %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("Validate = %v, want an error containing %q", err, tt.err)
			}
		})
	}
}

// The structs decode with gohcl as the config layer uses them.
func TestConfigDecodesFromHCL(t *testing.T) {
	const src = `
source {
  url                      = "nats://127.0.0.1:4222"
  subject                  = "orders.*"
  group_from_subject_token = 2
  user                     = "u"
  password                 = "p"
  tls {
    ca_file     = "/ca.pem"
    server_name = "nats.local"
  }
  jetstream {
    stream          = "ORDERS"
    durable         = "bridge"
    filter_subjects = ["orders.*"]
    ack_wait        = "45s"
    max_deliver     = 5
    fetch_batch     = 10
  }
}
sink {
  embedded            = true
  store_dir           = "/var/lib/qbridge/nats"
  port                = 4222
  subject             = "out.{group}"
  default_group_token = "none"
  jetstream {
    stream        = "OUT"
    create_stream = true
  }
}
`
	f, diags := hclsyntax.ParseConfig([]byte(src), "t.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var root struct {
		Source SourceConfig `hcl:"source,block"`
		Sink   SinkConfig   `hcl:"sink,block"`
	}
	if diags := gohcl.DecodeBody(f.Body, nil, &root); diags.HasErrors() {
		t.Fatal(diags)
	}
	s, k := root.Source, root.Sink
	if s.Subject != "orders.*" || s.GroupFromSubjectToken != 2 || s.TLS == nil || s.TLS.ServerName != "nats.local" ||
		s.JetStream == nil || s.JetStream.AckWait != "45s" || s.JetStream.MaxDeliver != 5 || len(s.JetStream.FilterSubjects) != 1 {
		t.Errorf("source = %+v (js %+v)", s, s.JetStream)
	}
	if !k.Embedded || k.Port != 4222 || k.Subject != "out.{group}" || k.JetStream == nil || !k.JetStream.CreateStream {
		t.Errorf("sink = %+v", k)
	}
	if err := s.Validate(); err != nil {
		t.Error(err)
	}
	if err := k.Validate(); err != nil {
		t.Error(err)
	}
}

func TestAutoBufferBytes(t *testing.T) {
	const mib, gib = 1 << 20, 1 << 30
	for _, tc := range []struct {
		limit int64
		host  uint64
		want  int
	}{
		// Under a memory limit: a quarter of it, 64 MiB – 1 GiB; the host's memory does not count.
		{16 * gib, 64 * gib, MaxAutoBufferBytes},
		{4 * gib, 64 * gib, gib},
		{1 * gib, 64 * gib, 256 * mib},
		{512 * mib, 64 * gib, 128 * mib},
		{400 * mib, 0, 100 * mib},
		{256 * mib, 64 * gib, MinAutoBufferBytes}, // a quarter is nats.go's default
		{128 * mib, 64 * gib, MinAutoBufferBytes}, // never below it
		// No limit: an eighth of the host's memory, 256 MiB – 1 GiB.
		{math.MaxInt64, 24 * gib, MaxAutoBufferBytes},
		{math.MaxInt64, 8 * gib, gib},
		{math.MaxInt64, 4 * gib, 512 * mib},
		{math.MaxInt64, 2 * gib, MinHostBufferBytes},
		{math.MaxInt64, 0, MinHostBufferBytes}, // host memory unknown
		{0, 4 * gib, 512 * mib},
		{math.MaxInt64, math.MaxUint64, MaxAutoBufferBytes},
	} {
		if got := AutoBufferBytes(tc.limit, tc.host); got != tc.want {
			t.Errorf("AutoBufferBytes(limit %d MiB, host %d MiB) = %d MiB, want %d MiB", tc.limit/mib, tc.host/mib, got/mib, tc.want/mib)
		}
	}
}

func TestAutoBufferSize(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct{ bytes, want int }{
		{MinAutoBufferBytes, DefaultBufferSize}, // nats.go's defaults, as a pair
		{256 * mib, DefaultBufferSize},
		{400 * mib, DefaultBufferSize}, // fewer 1 KiB messages than nats.go's limit
		{512 * mib, 512 << 10},
		{1 << 30, 1 << 20},
	} {
		if got := AutoBufferSize(tc.bytes); got != tc.want {
			t.Errorf("AutoBufferSize(%d MiB) = %d, want %d", tc.bytes/mib, got, tc.want)
		}
	}
}

// TestSourceBufferFollowsMemoryLimit: buffer_bytes left out follows the
// runtime's memory limit; set, it is kept.
func TestSourceBufferFollowsMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(400 << 20)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	c := SourceConfig{ConnConfig: ConnConfig{URL: "nats://127.0.0.1:4222"}, Subject: "in"}
	s, err := c.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if s.bufferBytes != 100<<20 || s.bufferSize != DefaultBufferSize {
		t.Errorf("buffer_bytes and buffer_size unset under a 400 MiB limit: %d, %d; want 100 MiB, %d", s.bufferBytes, s.bufferSize, DefaultBufferSize)
	}
	debug.SetMemoryLimit(8 << 30)
	if s, err = c.resolve(); err != nil {
		t.Fatal(err)
	}
	if s.bufferBytes != 1<<30 || s.bufferSize != 1<<20 {
		t.Errorf("buffer_bytes and buffer_size unset under an 8 GiB limit: %d, %d; want 1 GiB, %d", s.bufferBytes, s.bufferSize, 1<<20)
	}
	debug.SetMemoryLimit(400 << 20)
	c.BufferBytes = 1 << 20
	if s, err = c.resolve(); err != nil {
		t.Fatal(err)
	}
	if s.bufferBytes != 1<<20 {
		t.Errorf("buffer_bytes = 1 MiB: got %d", s.bufferBytes)
	}
}
