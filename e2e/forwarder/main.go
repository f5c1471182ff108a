// Command forwarder is the baseline of the hot-path benchmarks
// (e2e/hotpath_bench_test.go): the smallest correct hand-written NATS
// forwarder a user would write instead of running qbridge. Core: subscribe
// → publish. JetStream: pull-consume a durable consumer → async publish →
// ack each message once its PubAck arrived (at least once, like qbridge).
package main

import (
	"context"
	"flag"
	"log"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	url := flag.String("url", nats.DefaultURL, "NATS server")
	in := flag.String("in", "in", "subject (core) or stream (-jetstream) to read")
	out := flag.String("out", "out", "subject to publish to")
	js := flag.Bool("jetstream", false, "read a durable pull consumer of stream -in, publish to JetStream")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	nc, err := nats.Connect(*url)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Drain()
	if !*js {
		if _, err := nc.Subscribe(*in, func(m *nats.Msg) {
			_ = nc.PublishMsg(&nats.Msg{Subject: *out, Header: m.Header, Data: m.Data})
		}); err != nil {
			log.Fatal(err)
		}
		<-ctx.Done()
		return
	}
	j, _ := jetstream.New(nc)
	c, err := j.CreateOrUpdateConsumer(ctx, *in, jetstream.ConsumerConfig{Durable: "fwd", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		log.Fatal(err)
	}
	cc, err := c.Consume(func(m jetstream.Msg) {
		f, err := j.PublishMsgAsync(&nats.Msg{Subject: *out, Header: m.Headers(), Data: m.Data()})
		if err != nil {
			_ = m.Nak()
			return
		}
		go func() { // one goroutine per message: the simple way, as users write it
			select {
			case <-f.Ok():
				_ = m.Ack()
			case <-f.Err():
				_ = m.Nak()
			}
		}()
	}, jetstream.PullMaxMessages(1000))
	if err != nil {
		log.Fatal(err)
	}
	<-ctx.Done()
	cc.Stop()
}
