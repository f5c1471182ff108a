package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/internal/testlog"
	"github.com/qbridge/qbridge/mapping"
)

func startNATS(t *testing.T) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(s.Shutdown)
	return s
}

func run(t *testing.T, c func(context.Context, []string, stdio) int, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb testlog.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := c(ctx, args, stdio{In: strings.NewReader(stdin), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func TestParseAttrFlag(t *testing.T) {
	tests := []struct {
		in   string
		name string
		want mapping.Value
		err  bool
	}{
		{"n:Number.int=42", "n", mapping.Int32(42), false},
		{"s=hello", "s", mapping.String("hello"), false},
		{"eq=a=b", "eq", mapping.String("a=b"), false},
		{"ok:String.bool=true", "ok", mapping.Bool(true), false},
		{"x.y:z:Number=1.50", "x.y:z", mapping.Number("1.50"), false},
		{"b:Binary=aGk=", "b", mapping.Binary([]byte("hi")), false},
		{"u:String.uuid=6ba7b810-9dad-11d1-80b4-00c04fd430c8", "u", func() mapping.Value {
			u, _ := mapping.ParseUUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
			return mapping.UUID(u)
		}(), false},
		{"noequals", "", mapping.Value{}, true},
		{"=v", "", mapping.Value{}, true},
		{"n:Bogus=1", "", mapping.Value{}, true},
		{"b:Binary=!!", "", mapping.Value{}, true},
		{"qty:Number.int=abc", "", mapping.Value{}, true},
		{"qty:Number.int=3.5", "", mapping.Value{}, true},
		{"qty:Number.int=99999999999", "", mapping.Value{}, true},
		{"n:Number=zz", "", mapping.Value{}, true},
		{"ok:String.bool=maybe", "", mapping.Value{}, true},
		{"u:String.uuid=nope", "", mapping.Value{}, true},
		{"c:String.custom=anything", "c", mapping.String("anything").WithLabel("custom"), false},
		// A float's text that does not print back the same is still a
		// float (it was refused): kept as written, the codecs give the
		// float and the exact text.
		{"p:Number.float=19.90", "p", mapping.Number("19.90").WithLabel("float"), false},
		{"p:Number.double=3.50", "p", mapping.Number("3.50").WithLabel("double"), false},
		{"p:Number.float=1e3", "p", mapping.Number("1e3").WithLabel("float"), false},
		{"p:Number.float=1,5", "", mapping.Value{}, true},
	}
	for _, tt := range tests {
		name, v, err := parseAttrFlag(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("%q: err = %v", tt.in, err)
			continue
		}
		if err == nil && (name != tt.name || !v.Equal(tt.want)) {
			t.Errorf("%q = %q %v, want %q %v", tt.in, name, v, tt.name, tt.want)
		}
	}
}

// A usage error names the wrong argument instead of printing the usage.
func TestSendUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{}, "-subject is required"},
		{[]string{"-subject", "a"}, "the BODY argument is missing"},
		{[]string{"-subject", "a", "x", "y"}, `one BODY argument, not 2 ("y" is another`},
		{[]string{"-subject", "a", "-attr", "bad", "x"}, `-attr: "bad": want name[:Type]=value`},
		{[]string{"-subject", "a", "-attr", "qty:Number.int=abc", "x"}, `-attr: "qty:Number.int=abc": "abc" is not a number`},
		{[]string{"-subject", "a", "-header", "bad", "x"}, `-header "bad": want name=value`},
		// Refused before connecting (the flags point at no server here).
		{[]string{"-subject", "a", "-header", "a b=x", "x"}, `-header "a b=x": "a b" is not a valid NATS header name`},
	} {
		code, _, errOut := run(t, runSend, "", tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.want) || strings.Contains(errOut, "usage:") {
			t.Errorf("send %v = %d\n%s\nwant 2 and %q without the usage", tt.args, code, errOut, tt.want)
		}
	}
}

func TestSendCore(t *testing.T) {
	srv := startNATS(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, _ := nc.SubscribeSync("demo.in")
	_ = nc.Flush()
	code, out, errs := run(t, runSend, "from stdin", "-url", srv.ClientURL(), "-subject", "demo.in",
		"-header", "X-Raw=1", "-attr", "n:Number.int=42", "-group", "g1", "-id", "m-1", "-")
	if code != 0 {
		t.Fatalf("send = %d: %s", code, errs)
	}
	if !strings.Contains(out, "published to demo.in") {
		t.Errorf("out = %q", out)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != "from stdin" || m.Header.Get("X-Raw") != "1" || m.Header.Get("Qbridge-Group") != "g1" {
		t.Errorf("wire message %q %v", m.Data, m.Header)
	}
}

func TestSendJetStream(t *testing.T) {
	srv := startNATS(t)
	nc, _ := nats.Connect(srv.ClientURL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "DEMO", Subjects: []string{"demo.>"}}); err != nil {
		t.Fatal(err)
	}
	args := []string{"-url", srv.ClientURL(), "-subject", "demo.in", "-jetstream", "-id", "same", "body"}
	code, out, errs := run(t, runSend, "", args...)
	if code != 0 || !strings.Contains(out, "stream DEMO sequence 1") {
		t.Fatalf("send = %d %q %q", code, out, errs)
	}
	code, out, _ = run(t, runSend, "", args...)
	if code != 0 || !strings.Contains(out, "duplicate") {
		t.Errorf("second send with the same id = %d %q, want a duplicate", code, out)
	}
	code, _, errs = run(t, runSend, "", "-url", srv.ClientURL(), "-subject", "nostream", "-jetstream", "x")
	if code != 1 || !strings.Contains(errs, "no stream") {
		t.Errorf("send to a subject no stream stores = %d %q", code, errs)
	}
}

// A password in -url never reaches the error output, whatever fails: the
// connect error quoted the URL as given.
func TestNATSCommandsRedactTheURL(t *testing.T) {
	const secret = "s3cret-pw"
	auth, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, Username: "u", Password: "other", NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	auth.Start()
	defer auth.Shutdown()
	if !auth.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String() // nothing listens there any more
	ln.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	for _, c := range []struct {
		name, url, want string
	}{
		{"refused", "nats://u:" + secret + "@" + closed, "no servers available"},
		{"wrong password", "nats://u:" + secret + "@" + auth.Addr().String(), "refused the credentials"},
		{"silent server", "nats://u:" + secret + "@" + silent.Addr().String(), "timeout"},
		{"unparsable", "nats://u:" + secret + "%zz@" + closed, "percent-encoded"},
		{"second URL", "nats://" + closed + ",nats://u:" + secret + "@" + closed, "no servers available"},
	} {
		for cmd, f := range map[string]func(context.Context, []string, stdio) int{"send": runSend, "tail": runTail} {
			t.Run(c.name+"/"+cmd, func(t *testing.T) {
				args := []string{"-url", c.url, "-timeout", "500ms", "-subject", "a"}
				if cmd == "send" {
					args = append(args, "x")
				}
				code, _, errOut := run(t, f, "", args...)
				if code != 1 || !strings.Contains(errOut, c.want) {
					t.Errorf("exit %d, want 1 and %q:\n%s", code, c.want, errOut)
				}
				if strings.Contains(errOut, secret) {
					t.Errorf("the password is in the output:\n%s", errOut)
				}
			})
		}
	}
}
