package nats

import (
	"testing"
	"time"

	"github.com/qbridge/qbridge/bridge/driver"
)

// AckBatch acknowledges a whole batch (pipelined acks, the last one
// confirmed): the server's ack floor moves past all of them and nothing is
// pending or redelivered.
func TestJetStreamAckBatch(t *testing.T) {
	f := newJSFixture(t)
	for range 50 {
		f.publish(t, "orders.a", "x")
	}
	src, _ := f.source(t)
	ds := receiveN(t, src, 50, 5*time.Second)
	ba, ok := src.(driver.BatchAcker)
	if !ok {
		t.Fatal("the JetStream source must be a driver.BatchAcker")
	}
	for i, err := range ba.AckBatch(ctxT(t, 5*time.Second), ds) {
		if err != nil {
			t.Errorf("ack %d: %v", i, err)
		}
	}
	// The last ack was confirmed, so the server has processed all of them:
	// no wait is needed before asking.
	if info := f.consumerInfo(t, "bridge"); info.AckFloor.Stream != 50 || info.NumAckPending != 0 || info.NumRedelivered != 0 {
		t.Errorf("ack floor %d, pending %d, redelivered %d", info.AckFloor.Stream, info.NumAckPending, info.NumRedelivered)
	}
}
