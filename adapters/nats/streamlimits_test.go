package nats

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// A sidecar's spool: the streams create_stream makes keep what their
// stream_* attributes say. Without them a stream kept every message for
// ever (limits retention, no limit), and an audit saw the sidecar's store
// grow with all it had carried, acknowledged or not, until its volume
// filled. Here the sink's stream is a work queue capped in bytes that
// refuses when full, and the source's stream a work queue: what qbridge
// acknowledges leaves it.
func TestCreatedStreamsKeepTheirLimits(t *testing.T) {
	srv := startServer(t)
	url := srv.ClientURL()
	snk, _ := mustSink(t, SinkConfig{ConnConfig: ConnConfig{URL: url}, Subject: "spool.in",
		JetStream: &JetStreamSinkConfig{Stream: "SPOOL_IN", CreateStream: true, StreamLimitsConfig: StreamLimitsConfig{
			Retention: "workqueue", MaxBytes: 1 << 20, Discard: "new", MaxAge: "24h"}}})
	src, _ := mustSource(t, SourceConfig{ConnConfig: ConnConfig{URL: url}, Subject: "spool.out",
		JetStream: &JetStreamSourceConfig{Stream: "SPOOL_OUT", Durable: "qbridge", CreateStream: true,
			StreamLimitsConfig: StreamLimitsConfig{Retention: "workqueue", MaxMsgs: 1000}}})

	js, err := jetstream.New(connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	info := func(name string) *jetstream.StreamInfo {
		st, err := js.Stream(ctxT(t, 5*time.Second), name)
		if err != nil {
			t.Fatal(err)
		}
		i, err := st.Info(ctxT(t, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	in := info("SPOOL_IN").Config
	if in.Retention != jetstream.WorkQueuePolicy || in.MaxBytes != 1<<20 || in.Discard != jetstream.DiscardNew || in.MaxAge != 24*time.Hour || in.MaxMsgs != -1 {
		t.Errorf("SPOOL_IN: %+v", in)
	}
	out := info("SPOOL_OUT").Config
	if out.Retention != jetstream.WorkQueuePolicy || out.MaxMsgs != 1000 || out.Discard != jetstream.DiscardOld {
		t.Errorf("SPOOL_OUT: %+v", out)
	}

	// Full: the sink's publish is refused (discard new), not an old
	// message dropped.
	big := make([]*mapping.Message, 3)
	for i := range big {
		big[i] = &mapping.Message{ID: fmt.Sprint(i), Body: make([]byte, 400<<10)}
	}
	errs := snk.Send(ctxT(t, 10*time.Second), big)
	if errs[0] != nil || errs[1] != nil || errs[2] == nil {
		t.Errorf("sends into a 1 MiB stream of 400 KiB each: %v", errs)
	}

	// What the source acknowledges leaves its work-queue stream.
	for i := range 5 {
		if _, err := js.Publish(ctxT(t, 5*time.Second), "spool.out", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	var got []driver.Delivery
	for len(got) < 5 {
		ds, err := src.Receive(ctxT(t, 10*time.Second), 5-len(got))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ds...)
	}
	for _, err := range src.(driver.BatchAcker).AckBatch(ctxT(t, 10*time.Second), got) {
		if err != nil {
			t.Fatal(err)
		}
	}
	// The acks are confirmed by the server (double ack): the messages are
	// gone once AckBatch returns.
	if n := info("SPOOL_OUT").State.Msgs; n != 0 {
		t.Fatalf("SPOOL_OUT still holds %d acknowledged messages", n)
	}
}

func TestStreamLimitsRefused(t *testing.T) {
	for _, tc := range []struct {
		cfg  SinkConfig
		want string
	}{
		{SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a", JetStream: &JetStreamSinkConfig{Stream: "S", StreamLimitsConfig: StreamLimitsConfig{MaxBytes: 10}}}, "jetstream.stream_max_bytes: only used with create_stream"},
		{SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a", JetStream: &JetStreamSinkConfig{Stream: "S", CreateStream: true, StreamLimitsConfig: StreamLimitsConfig{Retention: "forever"}}}, "jetstream.stream_retention"},
		{SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a", JetStream: &JetStreamSinkConfig{Stream: "S", CreateStream: true, StreamLimitsConfig: StreamLimitsConfig{Discard: "oldest"}}}, "jetstream.stream_discard"},
		{SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a", JetStream: &JetStreamSinkConfig{Stream: "S", CreateStream: true, StreamLimitsConfig: StreamLimitsConfig{MaxMsgs: -1}}}, "jetstream.stream_max_msgs"},
		{SinkConfig{ConnConfig: ConnConfig{URL: "nats://h"}, Subject: "a", JetStream: &JetStreamSinkConfig{Stream: "S", CreateStream: true, StreamLimitsConfig: StreamLimitsConfig{MaxAge: "a while"}}}, "jetstream.stream_max_age"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg.JetStream.StreamLimitsConfig, err, tc.want)
		}
	}
	src := SourceConfig{ConnConfig: ConnConfig{URL: "nats://h"}, JetStream: &JetStreamSourceConfig{Stream: "S", Durable: "d", StreamLimitsConfig: StreamLimitsConfig{Retention: "workqueue"}}}
	if err := src.Validate(); err == nil || !strings.Contains(err.Error(), "jetstream.stream_retention: only used with create_stream") {
		t.Errorf("source: %v", err)
	}
}
