package amqp

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/internal/testenv"
	"github.com/qbridge/qbridge/mapping"
)

// declareSAC declares a durable queue with single active consumer (as an
// operator does with the queue: RabbitMQ 3.x's AMQP 1.0 plugin cannot) and
// returns its name.
func declareSAC(t *testing.T) string {
	t.Helper()
	node := testenv.SharedRabbitMQ(t)
	name := strings.TrimPrefix(queue(t), "/queue/")
	node.DeclareQueue(t, name, true)
	return name
}

// TestOrderWarningOnRabbitMQ: a source on a RabbitMQ queue says at start
// that a second consumer would break group order, unless the queue has
// single active consumer.
func TestOrderWarningOnRabbitMQ(t *testing.T) {
	url := brokerURL(t)
	_, logs := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: queue(t)})
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "RabbitMQ pins no message group") {
		t.Errorf("no warning:\n%s", l)
	}
	name := declareSAC(t)
	_, logs = newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: "/amq/queue/" + name, SingleActiveConsumer: true})
	if l := logs.String(); strings.Contains(l, "pins no message group") || !strings.Contains(l, "single active consumer") {
		t.Errorf("log:\n%s", l)
	}
}

// TestSingleActiveConsumerAddress: RabbitMQ 3.x cannot attach to a single
// active consumer queue through /queue/NAME; the error says what to write.
func TestSingleActiveConsumerAddress(t *testing.T) {
	url := brokerURL(t)
	name := declareSAC(t)
	log, _ := testLog(t)
	cfg := SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: "/queue/" + name, SingleActiveConsumer: true}
	set, err := cfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newSource(ctxT(t, 30*time.Second), set, log); err == nil || !strings.Contains(err.Error(), `"/amq/queue/`+name+`"`) {
		t.Fatalf("err = %v", err)
	}
	// Without the setting, RabbitMQ's own refusal gets the same hint.
	cfg.SingleActiveConsumer, cfg.Durable, cfg.ContainerID, cfg.LinkName = false, true, "c", "l"
	if set, err = cfg.resolve(); err != nil {
		t.Fatal(err)
	}
	if _, err := newSource(ctxT(t, 30*time.Second), set, log); err == nil || !strings.Contains(err.Error(), "single_active_consumer = true") {
		t.Fatalf("err = %v", err)
	}
}

// TestSingleActiveConsumerFailover: two sources on a single active
// consumer queue: one receives, the other gets nothing; when the first
// goes (its unsettled message returns), the second takes over and gets
// the rest in order.
func TestSingleActiveConsumerFailover(t *testing.T) {
	url := brokerURL(t)
	name := declareSAC(t)
	addr := "/amq/queue/" + name
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Address: addr})
	var msgs []*mapping.Message
	for i := range 10 {
		m := textMsg(fmt.Sprint(i))
		m.GroupKey = "g"
		msgs = append(msgs, m)
	}
	sendAll(t, snk, msgs)
	a, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: addr, SingleActiveConsumer: true})
	b, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Address: addr, SingleActiveConsumer: true})
	first := receiveN(t, a, 1, 10*time.Second)
	if err := first[0].Ack(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	_ = receiveN(t, a, 1, 10*time.Second) // held unsettled when a goes
	expectNone(t, b, time.Second)         // the waiting consumer gets nothing while a is active
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 9 { // credit 1 on RabbitMQ 3.x: the next comes once this one is settled
		for _, d := range receiveN(t, b, 1, 20*time.Second) {
			got = append(got, d.Message().ID)
			if err := d.Ack(ctxT(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := "1 2 3 4 5 6 7 8 9"; strings.Join(got, " ") != want {
		t.Errorf("after the failover: %v, want %s", got, want)
	}
}
