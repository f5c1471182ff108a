package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/internal/testlog"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/natsmap"
)

func TestTailCore(t *testing.T) {
	srv := startNATS(t)
	var out, errb testlog.Buffer
	done := make(chan int, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- runTail(ctx, []string{"-url", srv.ClientURL(), "-subject", "demo.>", "-n", "1"}, stdio{Out: &out, Err: &errb})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(errb.String(), "following") {
		if time.Now().After(deadline) {
			t.Fatalf("tail never subscribed: %s", errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, _, errs := run(t, runSend, "", "-url", srv.ClientURL(), "-subject", "demo.out",
		"-attr", "n:Number.int=42", "-group", "g1", "hello"); code != 0 {
		t.Fatal(errs)
	}
	if code := <-done; code != 0 {
		t.Fatalf("tail = %d: %s", code, errb.String())
	}
	for _, want := range []string{"--- demo.out", "group:", "g1", `n (Number.int) = "42"`, "hello"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tail output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestTailJetStreamJSON(t *testing.T) {
	srv := startNATS(t)
	nc, _ := nats.Connect(srv.ClientURL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "OUT", Subjects: []string{"demo.out"}}); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"one", "two"} {
		if code, _, errs := run(t, runSend, "", "-url", srv.ClientURL(), "-subject", "demo.out", "-jetstream", body); code != 0 {
			t.Fatal(errs)
		}
	}
	code, out, errs := run(t, runTail, "", "-url", srv.ClientURL(), "-subject", "demo.out", "-jetstream", "-from", "all", "-n", "2", "-json")
	if code != 0 {
		t.Fatalf("tail = %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines, got %q", out)
	}
	for i, l := range lines {
		var r struct {
			Subject string `json:"subject"`
			Data    string `json:"data"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		if want := []string{"one", "two"}[i]; r.Subject != "demo.out" || r.Data != want {
			t.Errorf("line %d = %s", i, l)
		}
	}
	// -from last shows the last stored message with its stream position.
	code, out, errs = run(t, runTail, "", "-url", srv.ClientURL(), "-subject", "demo.out", "-jetstream", "-n", "1")
	if code != 0 || !strings.Contains(out, "OUT seq 2") || !strings.Contains(out, "two") {
		t.Errorf("tail -from last = %d %q %q", code, out, errs)
	}
	// No stream for the subject.
	if code, _, errs := run(t, runTail, "", "-url", srv.ClientURL(), "-subject", "nothing", "-jetstream", "-n", "1"); code != 1 || !strings.Contains(errs, "no stream") {
		t.Errorf("tail without a stream = %d %q", code, errs)
	}
	if code, _, _ := run(t, runTail, "", "-subject", "x", "-from", "bogus"); code != 2 {
		t.Errorf("bad -from = %d", code)
	}
}

// tail shows what the writer carried: the source facts of carry_source (a
// dead letter's reason among them) in the text form, and the message as it
// is on the wire with -json. Both re-rendered the message and left them
// out (an audit took carry_source for broken).
func TestTailShowsCarriedSourceFacts(t *testing.T) {
	srv := startNATS(t)
	nc, _ := nats.Connect(srv.ClientURL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"demo.dlq"}}); err != nil {
		t.Fatal(err)
	}
	m := &mapping.Message{Body: []byte("bad"), Source: mapping.Source{Protocol: "servicebus", Address: "orders/$DeadLetterQueue",
		SequenceNumber: "42", DeadLetterReason: "mapping", DeadLetterDesc: "five is not a number", PartitionID: -1}}
	msg, err := natsmap.Encode(m, "demo.dlq", natsmap.EncodeOptions{Options: mapping.Options{CarrySource: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, runTail, "", "-url", srv.ClientURL(), "-subject", "demo.dlq", "-jetstream", "-from", "all", "-n", "1")
	if code != 0 || !strings.Contains(out, "carried from the source:") || !strings.Contains(out, "dead-letter-reason:      mapping") || strings.Contains(out, "delivery-count") ||
		!strings.Contains(out, "orders/$DeadLetterQueue") {
		t.Errorf("tail = %d:\n%s%s", code, out, errs)
	}
	code, out, errs = run(t, runTail, "", "-url", srv.ClientURL(), "-subject", "demo.dlq", "-jetstream", "-from", "all", "-n", "1", "-json")
	if code != 0 || !strings.Contains(out, `deadLetterReason`) || !strings.Contains(out, `"subject":"demo.dlq"`) {
		t.Errorf("tail -json = %d:\n%s%s", code, out, errs)
	}
}
