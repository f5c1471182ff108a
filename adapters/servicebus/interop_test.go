package servicebus

import (
	"testing"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

// restConn is the HTTPS transport to the broker under test: the test
// server's REST port, or the namespace itself.
func restConn(t *testing.T) ConnConfig {
	t.Helper()
	c := fastConn()
	c.Transport = "https"
	if brokerHTTP == "" && !realNS {
		t.Skip("the test server has no REST port")
	}
	c.Endpoint = brokerHTTP
	return c
}

// One broker, two transports: a message sent over HTTPS is received over
// AMQP as the same model (sbrest records the types the header text cannot
// give), and one sent over AMQP with the types HTTPS headers keep is
// received over HTTPS as the same model. Settlement over HTTPS works on the
// broker's own locks.
func TestInteropHTTPSAndAMQP(t *testing.T) {
	needBroker(t)
	t.Parallel()
	q := entity("interop")
	emptyQueue(t, q) // what a failed earlier run (go test -count=N) left
	at := time.Date(2011, 3, 4, 8, 49, 37, 0, time.UTC)
	viaREST := &mapping.Message{ID: "via-rest", Body: []byte(`{"a":1}`), ContentType: "application/json", Subject: "s",
		CorrelationID: "c", To: "to", ReplyTo: "rt", TTL: 90 * time.Second,
		Attributes: []mapping.Attribute{
			{Name: "Count", Value: mapping.Int32(3)},
			{Name: "Flag", Value: mapping.Bool(true)},
			{Name: "Id", Value: mapping.UUID(uuid1)},
			{Name: "Number", Value: mapping.Number("1.50")},
			{Name: "Price", Value: mapping.Float64(299.98)},
			{Name: "Priority", Value: mapping.String("High")},
			{Name: "Raw", Value: mapping.Binary([]byte{1, 2})},
			{Name: "When", Value: mapping.Timestamp(at)},
		}}
	viaAMQP := &mapping.Message{ID: "via-amqp", Body: []byte("plain"), ContentType: "text/plain", Subject: "s2", TTL: time.Hour,
		Attributes: []mapping.Attribute{
			{Name: "Count", Value: mapping.Int64(-7)},
			{Name: "Flag", Value: mapping.Bool(false)},
			{Name: "Price", Value: mapping.Float64(0.5)},
			{Name: "Priority", Value: mapping.String("Low")},
		}}

	restSnk, _ := newTestSink(t, SinkConfig{ConnConfig: restConn(t), Queue: q})
	amqpSrc, _ := newTestSource(t, SourceConfig{Queue: q, MaxMessages: 1})
	sendAll(t, restSnk, viaREST)
	d := receiveN(t, amqpSrc, 1, 15*time.Second)[0]
	if err := d.(driver.DecodeErrorer).DecodeError(); err != nil {
		t.Fatal(err)
	}
	// header fields are the broker's for a message sent over REST (the
	// test server marks it durable, and first-acquirer on a first delivery)
	want := viaREST.Clone()
	want.Durable, want.FirstAcquirer = d.Message().Durable, d.Message().FirstAcquirer
	mappingtest.Check(t, want, d.Message())
	ack(t, d)

	amqpSnk, _ := newTestSink(t, SinkConfig{Queue: q})
	restSrc, _ := newTestSource(t, SourceConfig{ConnConfig: restConn(t), Queue: q, MaxMessages: 1, ReceiveWait: "2s"})
	sendAll(t, amqpSnk, viaAMQP)
	d = receiveN(t, restSrc, 1, 15*time.Second)[0]
	if err := d.(driver.DecodeErrorer).DecodeError(); err != nil {
		t.Fatal(err)
	}
	got := d.Message()
	mappingtest.Check(t, viaAMQP, got)
	if got.Source.LockToken == "" || got.Source.SequenceNumber == "" || got.Source.DeliveryCount != 1 {
		t.Errorf("source facts over HTTPS: %+v", got.Source)
	}
	// unlock over HTTPS: the AMQP source gets it again (the HTTPS source
	// is closed first, or its peek-lock workers would race for it; an
	// HTTPS delivery settles by its lock URL, source or not)
	if err := restSrc.Close(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := d.Nack(ctxT(t, 5*time.Second), 0); err != nil {
		t.Fatal(err)
	}
	d = receiveN(t, amqpSrc, 1, 15*time.Second)[0]
	if d.Message().ID != "via-amqp" || d.Message().Source.DeliveryCount != 2 {
		t.Fatalf("after unlock: %s count %d", d.Message().ID, d.Message().Source.DeliveryCount)
	}
	ack(t, d)
}

// The long polls an HTTPS source's Close cancelled take nothing: a message
// sent right after is received over AMQP at once, on its first delivery.
// (The test server used to lock it for a departed poll, so it came back
// only when that 5 s lock expired, one delivery count later: the cause of
// TestInteropHTTPSAndAMQP's "after unlock: count 3" under load.)
func TestHTTPSClosedSourceTakesNothing(t *testing.T) {
	needTestServer(t)
	t.Parallel()
	q := entity("rest-gone")
	emptyQueue(t, q)
	amqpSnk, _ := newTestSink(t, SinkConfig{Queue: q})
	restSrc, _ := newTestSource(t, SourceConfig{ConnConfig: restConn(t), Queue: q, ReceiveWait: "10s"})
	// One message through the HTTPS source: its workers are polling.
	sendAll(t, amqpSnk, textMsg("first"))
	ack(t, receiveN(t, restSrc, 1, 10*time.Second)...)
	if err := restSrc.Close(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	sendAll(t, amqpSnk, textMsg("second"))
	amqpSrc, _ := newTestSource(t, SourceConfig{Queue: q, MaxMessages: 1})
	d := receiveN(t, amqpSrc, 1, 3*time.Second)[0]
	if d.Message().ID != "second" || d.Message().Source.DeliveryCount != 1 {
		t.Fatalf("got %s on delivery %d, want second on its first", d.Message().ID, d.Message().Source.DeliveryCount)
	}
	ack(t, d)
}

// Over HTTPS against the broker: a 2 s lock renewed by Extend for 5 s,
// then completed; a lapsed lock fails the settlement.
func TestHTTPSRenewOnBroker(t *testing.T) {
	needTestServer(t)
	t.Parallel()
	q := entity("rest-settle")
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: restConn(t), Queue: q})
	src, _ := newTestSource(t, SourceConfig{ConnConfig: restConn(t), Queue: q, MaxMessages: 1, ReceiveWait: "1s"})
	sendAll(t, snk, textMsg("renewed"))
	d := receiveN(t, src, 1, 10*time.Second)[0]
	for range 7 {
		// Time passes on the broker's lock clock: without the renewals
		// the 2 s lock would lapse.
		time.Sleep(700 * time.Millisecond)
		if err := d.Extend(ctxT(t, 5*time.Second), time.Minute); err != nil {
			t.Fatalf("renew: %v", err)
		}
	}
	ack(t, d)
	sendAll(t, snk, textMsg("lapsed"))
	d = receiveN(t, src, 1, 10*time.Second)[0]
	again := receiveN(t, src, 1, 10*time.Second)[0] // after the lock lapses
	if again.Message().ID != "lapsed" || again.Message().Source.DeliveryCount != 2 {
		t.Fatalf("redelivery %s count %d", again.Message().ID, again.Message().Source.DeliveryCount)
	}
	if err := d.Ack(ctxT(t, 5*time.Second)); err == nil {
		t.Fatal("complete with a lapsed lock succeeded")
	}
	ack(t, again)
}
