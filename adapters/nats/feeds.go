package nats

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// SinkFeedsSource reports whether sink provably publishes into what src
// receives, so that a pipeline (or its dead-letter sink) would pass each
// message around forever; why says so, naming both addresses. It answers
// true only when certain: the same server by configuration (see
// serverIdentity) and a literal sink subject that src's subscription or
// consumer takes. A templated subject, a JetStream stream whose subjects the
// configuration does not state, or anything it cannot normalize counts as
// "different". Invalid configurations are never reported (Validate does).
func SinkFeedsSource(src SourceConfig, sink SinkConfig) (why string, loops bool) {
	ss, err := src.resolve()
	if err != nil {
		return "", false
	}
	ks, err := sink.resolve()
	if err != nil {
		return "", false
	}
	if ks.subject.tpl != nil {
		return "", false // rendered per message: which subjects is not known here
	}
	subject := ks.subject.raw
	srcServer, ok := serverIdentity(ss.conn)
	if !ok {
		return "", false
	}
	sinkServer, ok := serverIdentity(ks.conn)
	if !ok || srcServer.key != sinkServer.key {
		return "", false
	}
	if ss.conn.Embedded && ss.conn.Port != 0 && ks.conn.Port != 0 && ss.conn.Port != ks.conn.Port {
		return "", false // the sink then fails to open (acquireEmbedded): no loop
	}
	publishes := fmt.Sprintf("publishes to subject %q on %s", subject, sinkServer.desc)

	if ss.js == nil {
		// A core subscription also receives JetStream publishes: they are
		// core messages with a reply subject.
		if !server.SubjectMatchesFilter(subject, ss.subject) {
			return "", false
		}
		return fmt.Sprintf("%s, which the source's subscription to %q on the same server receives", publishes, ss.subject), true
	}

	js := ss.js
	if js.partitions > 0 {
		// The stream stores each message under a partition chosen by a hash:
		// whether this source's partition gets it is not known here.
		return "", false
	}
	if len(js.filterSubjects) > 0 && !matchesAny(subject, js.filterSubjects) {
		return "", false
	}
	// The stream must capture the subject. Its subjects are known only
	// from a create_stream of this configuration (the source's, or the
	// sink's for the same stream name); an existing stream may capture
	// anything, or be a mirror, or transform subjects.
	var known [][]string
	if js.createStream {
		known = append(known, js.streamSubjects)
	}
	if ks.js != nil && ks.js.createStream && ks.js.stream == js.stream {
		known = append(known, ks.js.streamSubjects)
	}
	if len(known) == 0 {
		return "", false
	}
	for _, subjects := range known {
		// Whichever side creates the stream first sets its subjects:
		// every candidate must capture the sink's subject.
		if !matchesAny(subject, subjects) {
			return "", false
		}
	}
	filter := "every subject of the stream"
	if len(js.filterSubjects) > 0 {
		filter = fmt.Sprintf("filter %s", quoteList(js.filterSubjects))
	}
	return fmt.Sprintf("%s, which stream %q (subjects %s) stores and the source's consumer %q (%s) reads",
		publishes, js.stream, quoteList(known[0]), js.durable, filter), true
}

func matchesAny(subject string, filters []string) bool {
	return slices.ContainsFunc(filters, func(f string) bool { return server.SubjectMatchesFilter(subject, f) })
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// identity names the server (and the account on it) a connection reaches:
// key compares, desc is for messages (no credentials).
type identity struct{ key, desc string }

// serverIdentity normalizes where cc connects and as whom. Embedded servers
// are one per store_dir in a process (acquireEmbedded). A URL list is
// compared as the set of its host:port (lower-case host, nats.go's default
// ports); the credentials are part of the key because different users may
// be in different accounts, whose subjects are separate. ok is false for a
// URL it cannot normalize.
func serverIdentity(cc connConfig) (id identity, ok bool) {
	auth := strings.Join([]string{cc.User, cc.Token, cc.NKeySeedFile, cc.CredsFile}, "\x00")
	if cc.Embedded {
		return identity{key: "embedded\x00" + cc.StoreDir + "\x00" + auth, desc: fmt.Sprintf("the embedded server (store_dir %s)", cc.StoreDir)}, true
	}
	servers, err := serverURLs(cc.URL)
	if err != nil {
		return identity{}, false
	}
	var hosts, users []string
	for _, s := range servers {
		u := s.u
		if u.Hostname() == "" {
			return identity{}, false
		}
		port := u.Port()
		if port == "" {
			switch u.Scheme {
			case "nats", "tls":
				port = "4222"
			case "ws":
				port = "80"
			case "wss":
				port = "443"
			default:
				return identity{}, false
			}
		}
		hosts = append(hosts, net.JoinHostPort(strings.ToLower(u.Hostname()), port))
		if u.User != nil {
			users = append(users, u.User.Username()) // a user or a token
		} else {
			users = append(users, "")
		}
	}
	if len(hosts) == 0 {
		return identity{}, false
	}
	slices.Sort(hosts)
	hosts = slices.Compact(hosts)
	slices.Sort(users)
	users = slices.Compact(users)
	return identity{
		key:  strings.Join(hosts, ",") + "\x00" + strings.Join(users, ",") + "\x00" + auth,
		desc: strings.Join(hosts, ", "),
	}, true
}
