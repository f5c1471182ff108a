package amqp

import (
	"fmt"
	"slices"
	"strings"
)

// SinkFeedsSource reports whether sink provably sends into the node src
// receives from, so that a pipeline (or its dead-letter sink) would pass
// each message around forever; why says so, naming both. It answers true
// only when certain: the same brokers (the set of host:port of url/urls,
// host lower-cased, default ports made explicit) and the same hostname
// (the virtual host), a sink address without placeholders equal to the
// source's address, and a source that takes every message of that node: no
// selector or filter (the sink's message might not match) and no
// capability but "queue" (a "topic" subscription of an address may be
// routed otherwise than a plain send to it).
func SinkFeedsSource(src SourceConfig, sink SinkConfig) (why string, loops bool) {
	ss, err := src.resolve()
	if err != nil {
		return "", false
	}
	ks, err := sink.resolve()
	if err != nil {
		return "", false
	}
	if !ks.isStatic || ks.static != ss.address {
		return "", false
	}
	if len(ss.filters) > 0 || slices.ContainsFunc(ss.capabilities, func(c string) bool { return c != "queue" }) {
		return "", false
	}
	a, b := brokerSet(ss.conn), brokerSet(ks.conn)
	if !slices.Equal(a, b) || ss.conn.hostname != ks.conn.hostname {
		return "", false
	}
	where := strings.Join(a, ", ")
	if ss.conn.hostname != "" {
		where += fmt.Sprintf(" (hostname %q)", ss.conn.hostname)
	}
	return fmt.Sprintf("sends to address %q on %s, the address the source receives from there", ks.static, where), true
}

// brokerSet is the sorted set of a connection's host:port.
func brokerSet(cs connSettings) []string {
	out := make([]string, len(cs.endpoints))
	for i, ep := range cs.endpoints {
		ep.host = strings.ToLower(ep.host)
		out[i] = ep.addr()
	}
	slices.Sort(out)
	return slices.Compact(out)
}
