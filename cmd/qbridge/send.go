package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	natsadapter "github.com/qbridge/qbridge/adapters/nats"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/natsmap"
)

func init() {
	register("send", command{
		Summary: "publish one message to NATS (core or JetStream) with typed attributes",
		Run:     runSend,
	})
}

// maxSendBody bounds a body read from stdin; NATS servers default to a
// 1 MiB max_payload anyway.
const maxSendBody = 64 << 20

// natsFlags are the connection flags send and tail share.
type natsFlags struct {
	url, user, password, token, creds, nkey, groupHeader string
	tlsCA, tlsCert, tlsKey, tlsServerName                string
	timeout                                              time.Duration
}

func (f *natsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "url", nats.DefaultURL, "NATS server URL(s), comma-separated")
	fs.StringVar(&f.user, "user", "", "user name (with -password)")
	fs.StringVar(&f.password, "password", "", "password")
	fs.StringVar(&f.token, "token", "", "authentication token")
	fs.StringVar(&f.creds, "creds", "", "credentials (.creds) file")
	fs.StringVar(&f.nkey, "nkey", "", "NKey seed file")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "CA file that verifies the server (TLS)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "client certificate file (TLS, with -tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "client key file (TLS, with -tls-cert)")
	fs.StringVar(&f.tlsServerName, "tls-server-name", "", "server name to verify (TLS)")
	fs.StringVar(&f.groupHeader, "group-header", "Qbridge-Group", "header that carries the group key")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "connect (and, for send, publish) timeout")
}

// connect dials through the NATS adapter, as a pipeline would: one
// connection path (URL check, TLS, credentials, redacted errors). Its log
// says what happens to the connection afterwards (a disconnect).
func (f *natsFlags) connect(ctx context.Context, name string, std stdio) (*nats.Conn, func(), error) {
	cfg := natsadapter.ConnConfig{
		URL: f.url, User: f.user, Password: f.password, Token: f.token,
		CredsFile: f.creds, NKeySeedFile: f.nkey,
		ConnectTimeout: f.timeout.String(), Name: "qbridge " + name,
	}
	if f.tlsCA != "" || f.tlsCert != "" || f.tlsKey != "" || f.tlsServerName != "" {
		cfg.TLS = &natsadapter.TLSConfig{CAFile: f.tlsCA, CertFile: f.tlsCert, KeyFile: f.tlsKey, ServerName: f.tlsServerName}
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	return natsadapter.Dial(ctx, cfg, newLogger(std.Err, "text", slog.LevelWarn))
}

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ", ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func runSend(ctx context.Context, args []string, std stdio) int {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	fs.SetOutput(std.Err)
	var nf natsFlags
	nf.register(fs)
	subject := fs.String("subject", "", "subject to publish to (required)")
	useJS := fs.Bool("jetstream", false, "publish with JetStream and wait for the stream's ack")
	group := fs.String("group", "", "group key (ordering key), sent in the group header")
	id := fs.String("id", "", "message id; also the JetStream Nats-Msg-Id unless -dedup-id is set")
	dedup := fs.String("dedup-id", "", "explicit deduplication id (Nats-Msg-Id)")
	contentType := fs.String("content-type", "", "content type")
	var headers, attrs multiFlag
	fs.Var(&headers, "header", "raw NATS header `name=value` (repeatable)")
	fs.Var(&attrs, "attr", "typed attribute `name[:Type]=value`, e.g. n:Number.int=42, ok:String.bool=true, s=text (repeatable; Type is an SQS-style data type, default String)")
	fs.Usage = func() {
		fmt.Fprintln(std.Err, "usage: qbridge send -subject SUBJECT [-url URL] [-jetstream] [-header k=v]... [-attr name:Type=value]... [-group g] [-id x] BODY|-")
		fmt.Fprintln(std.Err, "\nBODY is the message body; - reads it from standard input, and after -- a BODY may begin with '-'.")
		fmt.Fprint(std.Err, "\nExample:\n  qbridge send -url nats://127.0.0.1:4222 -subject demo.in -jetstream -attr tenant=acme -attr qty:Number.int=3 'hello'\n\n")
		fs.PrintDefaults()
	}
	if err := parseArgs(fs, args); err != nil {
		return parseExit(err)
	}
	switch {
	case *subject == "":
		fmt.Fprintln(std.Err, "qbridge send: -subject is required (qbridge send -h for the flags)")
		return 2
	case fs.NArg() == 0:
		fmt.Fprintln(std.Err, "qbridge send: the BODY argument is missing (- reads it from standard input)")
		return 2
	case fs.NArg() > 1:
		fmt.Fprintf(std.Err, "qbridge send: one BODY argument, not %d (%q is another; put -- before a BODY that begins with '-')\n", fs.NArg(), fs.Arg(1))
		return 2
	}
	m := &mapping.Message{
		ID: *id, DedupID: *dedup, GroupKey: *group, ContentType: *contentType,
	}
	if fs.Arg(0) == "-" {
		b, err := io.ReadAll(io.LimitReader(std.In, maxSendBody+1))
		if err != nil {
			fmt.Fprintln(std.Err, "qbridge send: reading stdin:", err)
			return 1
		}
		if len(b) > maxSendBody {
			fmt.Fprintf(std.Err, "qbridge send: body over %d bytes\n", maxSendBody)
			return 1
		}
		m.Body = b
	} else {
		m.Body = []byte(fs.Arg(0))
	}
	for _, a := range attrs {
		name, v, err := parseAttrFlag(a)
		if err != nil {
			fmt.Fprintln(std.Err, "qbridge send: -attr:", err)
			return 2
		}
		m.SetAttr(name, v)
	}
	msg, err := natsmap.Encode(m, *subject, natsmap.EncodeOptions{GroupHeader: nf.groupHeader})
	if err != nil {
		fmt.Fprintln(std.Err, "qbridge send:", err)
		return 1
	}
	for _, h := range headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			fmt.Fprintf(std.Err, "qbridge send: -header %q: want name=value\n", h)
			return 2
		}
		if !natsmap.ValidHeaderName(k) {
			fmt.Fprintf(std.Err, "qbridge send: -header %q: %q is not a valid NATS header name (printable ASCII without ':' and \"()/,;<=>?@[\\]{})\n", h, k)
			return 2
		}
		if msg.Header == nil {
			msg.Header = nats.Header{}
		}
		msg.Header.Add(k, v)
	}

	nc, closeConn, err := nf.connect(ctx, "send", std)
	if err != nil {
		fmt.Fprintln(std.Err, "qbridge send:", err)
		return 1
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, nf.timeout)
	defer cancel()
	if *useJS {
		js, err := jetstream.New(nc)
		if err != nil {
			fmt.Fprintln(std.Err, "qbridge send:", err)
			return 1
		}
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
				err = fmt.Errorf("%w (no stream captures subject %q?)", err, *subject)
			}
			fmt.Fprintln(std.Err, "qbridge send:", err)
			return 1
		}
		dup := ""
		if ack.Duplicate {
			dup = " (duplicate: already stored)"
		}
		fmt.Fprintf(std.Out, "published to %s: stream %s sequence %d%s\n", *subject, ack.Stream, ack.Sequence, dup)
		return 0
	}
	if err := nc.PublishMsg(msg); err != nil {
		fmt.Fprintln(std.Err, "qbridge send:", err)
		return 1
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		fmt.Fprintln(std.Err, "qbridge send: flush:", err)
		return 1
	}
	fmt.Fprintf(std.Out, "published to %s (%d bytes)\n", *subject, len(m.Body))
	return 0
}

// parseAttrFlag parses name[:Type]=value. The type is an SQS-style data
// type (String, Number, Number.int, Binary, String.uuid, ...): mapping's one
// type spelling. The name is what precedes the last ':' before '='.
func parseAttrFlag(s string) (string, mapping.Value, error) {
	left, text, ok := strings.Cut(s, "=")
	if !ok {
		return "", mapping.Value{}, fmt.Errorf("%q: want name[:Type]=value", s)
	}
	name, dt := left, "String"
	if i := strings.LastIndexByte(left, ':'); i >= 0 {
		name, dt = left[:i], left[i+1:]
	}
	if name == "" {
		return "", mapping.Value{}, fmt.Errorf("%q: empty attribute name", s)
	}
	v, err := mapping.ParseValue(dt, text)
	if err == nil {
		// ParseValue keeps a value that does not parse as its label's type
		// as plain text (a broker may carry anything); a command line
		// should say the value is wrong instead of sending what an SQS
		// target refuses.
		err = mapping.CheckText(dt, text)
	}
	if err != nil {
		return "", mapping.Value{}, fmt.Errorf("%q: %w", s, err)
	}
	return name, v, nil
}
