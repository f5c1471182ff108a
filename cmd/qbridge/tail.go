package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/internal/adaptercfg"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/natsmap"
)

func init() {
	register("tail", command{
		Summary: "print NATS messages as they arrive, decoded (typed attributes, properties)",
		Run:     runTail,
	})
}

func runTail(ctx context.Context, args []string, std stdio) int {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	fs.SetOutput(std.Err)
	var nf natsFlags
	nf.register(fs)
	subject := fs.String("subject", "", "subject to follow; wildcards allowed (required)")
	n := fs.Int("n", 0, "exit after this many messages (0: follow until interrupted)")
	asJSON := fs.Bool("json", false, "print each message as it is on the wire (subject, headers, data), one JSON object per line")
	useJS := fs.Bool("jetstream", false, "read the stream that stores the subject (an ephemeral ordered consumer) instead of a core subscription")
	from := fs.String("from", "last", "with -jetstream: where to start: all (replay the stream), last (the last stored message) or new")
	fs.Usage = func() {
		fmt.Fprintln(std.Err, "usage: qbridge tail -subject SUBJECT [-url URL] [-n N] [-json] [-jetstream [-from all|last|new]]")
		fmt.Fprintln(std.Err, "\nA core subscription sees only what is published while it runs; -jetstream also shows stored messages.")
		fmt.Fprint(std.Err, "\nExample:\n  qbridge tail -url nats://127.0.0.1:4222 -subject demo.out -jetstream -n 1\n\n")
		fs.PrintDefaults()
	}
	if err := parseArgs(fs, args); err != nil {
		return parseExit(err)
	}
	if *subject == "" || fs.NArg() != 0 || *n < 0 {
		fs.Usage()
		return 2
	}
	var policy jetstream.DeliverPolicy
	switch *from {
	case "all":
		policy = jetstream.DeliverAllPolicy
	case "last":
		policy = jetstream.DeliverLastPolicy
	case "new":
		policy = jetstream.DeliverNewPolicy
	default:
		fmt.Fprintf(std.Err, "qbridge tail: -from %q: want all, last or new\n", *from)
		return 2
	}

	nc, closeConn, err := nf.connect(ctx, "tail", std)
	if err != nil {
		fmt.Fprintln(std.Err, "qbridge tail:", err)
		return 1
	}
	defer closeConn()

	msgs := make(chan tailMsg, 256)
	done := make(chan struct{}) // unblocks the handlers once we return
	defer close(done)
	deliver := func(tm tailMsg) {
		select {
		case msgs <- tm:
		case <-done:
		}
	}
	if *useJS {
		stop, err := followStream(ctx, nc, *subject, policy, deliver, nf.timeout)
		if err != nil {
			fmt.Fprintln(std.Err, "qbridge tail:", err)
			return 1
		}
		defer stop()
	} else {
		sub, err := nc.Subscribe(*subject, func(m *nats.Msg) { deliver(tailMsg{raw: m}) })
		if err != nil {
			fmt.Fprintln(std.Err, "qbridge tail:", err)
			return 1
		}
		defer sub.Unsubscribe() //nolint:errcheck // exiting anyway
		if err := nc.FlushTimeout(nf.timeout); err != nil {
			fmt.Fprintln(std.Err, "qbridge tail:", err)
			return 1
		}
	}
	fmt.Fprintf(std.Err, "qbridge tail: following %s on %s\n", *subject, adaptercfg.RedactURL(nc.ConnectedUrl()))

	dec := natsmap.DecodeOptions{GroupHeader: nf.groupHeader}
	for seen := 0; *n == 0 || seen < *n; seen++ {
		var tm tailMsg
		select {
		case tm = <-msgs:
		case <-ctx.Done():
			return 0
		}
		raw := tm.raw
		if *asJSON {
			// As it is on the wire: a re-rendering left out what the
			// writer carried (the source facts of carry_source, a dead
			// letter's reason in them).
			b, err := natsmap.WireJSON(raw)
			if err != nil {
				fmt.Fprintf(std.Err, "qbridge tail: %s: cannot render: %v\n", raw.Subject, err)
				continue
			}
			if _, err := std.Out.Write(append(b, '\n')); err != nil {
				return 1
			}
			continue
		}
		// Decoded without its reply subject: tail's own JetStream delivery
		// (printed apart) must not pass for facts the writer carried.
		bare := *raw
		bare.Reply = ""
		m, err := natsmap.Decode(&bare, dec)
		if err != nil {
			fmt.Fprintf(std.Err, "qbridge tail: %s: cannot decode: %v\n", raw.Subject, err)
			continue
		}
		if err := printMessage(std.Out, tm, m); err != nil {
			return 1
		}
	}
	return 0
}

// followStream feeds deliver from an ephemeral ordered consumer on the stream
// that stores subject.
func followStream(ctx context.Context, nc *nats.Conn, subject string, policy jetstream.DeliverPolicy,
	deliver func(tailMsg), timeout time.Duration) (func(), error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stream, err := js.StreamNameBySubject(lctx, subject)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("no stream stores %q (drop -jetstream to follow it live)", subject)
		}
		return nil, fmt.Errorf("finding the stream of %q: %w", subject, err)
	}
	cons, err := js.OrderedConsumer(lctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject}, DeliverPolicy: policy,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer on stream %s: %w", stream, err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		meta, _ := m.Metadata()
		deliver(tailMsg{raw: &nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}, meta: meta})
	})
	if err != nil {
		return nil, fmt.Errorf("consume stream %s: %w", stream, err)
	}
	return cc.Stop, nil
}

// tailMsg is one received message; meta is set for JetStream deliveries.
type tailMsg struct {
	raw  *nats.Msg
	meta *jetstream.MsgMetadata
}

// printMessage writes a human-readable view: the model's properties, typed
// attributes, then the body.
func printMessage(w io.Writer, tm tailMsg, m *mapping.Message) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "--- %s\n", tm.raw.Subject)
	if meta := tm.meta; meta != nil {
		fmt.Fprintf(&b, "  %-15s %s seq %d, stored %s\n", "stream:", meta.Stream, meta.Sequence.Stream, meta.Timestamp.UTC().Format(time.RFC3339Nano))
	}
	prop := func(name, v string) {
		if v != "" {
			fmt.Fprintf(&b, "  %-15s %s\n", name+":", v)
		}
	}
	prop("id", m.ID)
	prop("group", m.GroupKey)
	prop("dedup-id", m.DedupID)
	prop("correlation-id", m.CorrelationID)
	prop("subject", m.Subject)
	prop("content-type", m.ContentType)
	prop("reply-to", m.ReplyTo)
	prop("to", m.To)
	if m.TTL > 0 {
		prop("ttl", m.TTL.String())
	}
	if !m.CreationTime.IsZero() {
		prop("created", m.CreationTime.Format(time.RFC3339Nano))
	}
	if !m.Trace.IsZero() {
		prop("traceparent", m.Trace.Traceparent())
	}
	if src := m.Source; src.Protocol != "" && src.Protocol != "nats" || src.DeadLetterReason != "" {
		// Facts the writer carried from the original source (carry_source,
		// a dead letter's reason among them).
		fmt.Fprintln(&b, "  carried from the source:")
		sub := func(name, v string) {
			if v != "" {
				fmt.Fprintf(&b, "    %-24s %s\n", name+":", v)
			}
		}
		sub("protocol", src.Protocol)
		sub("address", src.Address)
		sub("message-id", src.MessageID)
		sub("sequence", src.SequenceNumber)
		if !src.EnqueuedTime.IsZero() {
			sub("enqueued", src.EnqueuedTime.Format(time.RFC3339Nano))
		}
		if src.DeliveryCount > 1 { // 1 is every decoded message's
			sub("delivery-count", strconv.Itoa(src.DeliveryCount))
		}
		sub("dead-letter-source", src.DeadLetterSource)
		sub("dead-letter-reason", src.DeadLetterReason)
		sub("dead-letter-description", src.DeadLetterDesc)
	}
	if len(m.Attributes) > 0 {
		fmt.Fprintln(&b, "  attributes:")
		for _, a := range m.Attributes {
			text, err := a.Value.Text()
			if err != nil {
				text = "<" + err.Error() + ">"
			}
			fmt.Fprintf(&b, "    %s (%s) = %s\n", a.Name, a.Value.DataType(), strconv.Quote(text))
		}
	}
	switch {
	case len(m.Body) == 0:
		fmt.Fprintln(&b, "  body: (empty)")
	case utf8.Valid(m.Body):
		fmt.Fprintf(&b, "  body (%d bytes):\n%s\n", len(m.Body), m.Body)
	default:
		fmt.Fprintf(&b, "  body (%d bytes, base64):\n%s\n", len(m.Body), base64.StdEncoding.EncodeToString(m.Body))
	}
	_, err := w.Write(b.Bytes())
	return err
}
