package servicebus

import (
	"fmt"
	"net"
	"strings"
)

// SinkFeedsSource reports whether sink provably sends into the queue src
// receives from, so that a pipeline (or its dead-letter sink) would pass
// each message around forever; why says so, naming both. It answers true
// only when certain: the same namespace (host[:port] of the connection
// string's Endpoint or namespace, lower-cased), connected to directly by
// both or through the same endpoint, and a sink entity without
// placeholders equal to the source's queue (a sender sends to a queue or
// topic by its name alone). A source reading a topic subscription is never
// reported: the subscription's rules, which this configuration does not
// show, may not take what the sink sends to the topic. Nor is a source
// reading a dead-letter sub-queue, which no sender writes to.
func SinkFeedsSource(src SourceConfig, sink SinkConfig) (why string, loops bool) {
	ss, err := src.resolve()
	if err != nil {
		return "", false
	}
	ks, err := sink.resolve()
	if err != nil {
		return "", false
	}
	if ss.queue == "" || ss.subQueue != "" {
		return "", false
	}
	entity, literal := ks.entity.Literal()
	if !literal || entity != ss.queue {
		return "", false // rendered per message, or another entity
	}
	a, b := ss.conn, ks.conn
	if !strings.EqualFold(a.namespace, b.namespace) {
		return "", false
	}
	// Without an endpoint both reach the namespace itself, whatever the
	// transport; an endpoint (a proxy, a test server) counts only when
	// both connect to the same place the same way.
	direct := src.Endpoint == "" && sink.Endpoint == ""
	if !direct && (a.https != b.https || a.plain != b.plain || a.dialPort != b.dialPort || !strings.EqualFold(a.dialHost, b.dialHost)) {
		return "", false
	}
	where := "namespace " + strings.ToLower(a.namespace)
	if !direct {
		where += " through " + net.JoinHostPort(strings.ToLower(a.dialHost), a.dialPort)
	}
	return fmt.Sprintf("sends to %s %q in %s, the queue the source receives from", ks.entityField, entity, where), true
}
