package nats

import (
	"fmt"
	"strings"
)

// SourceIdentity names what a source reads and on which server (no
// credentials), for qbridge migrate's copy checkpoints: a JetStream stream
// (and the consumer's filter, which decides which of its sequences are
// read), or a core subject.
func SourceIdentity(cfg SourceConfig) string {
	s, err := cfg.resolve()
	if err != nil {
		return "subject " + cfg.Subject // Validate refused it already
	}
	if s.js == nil {
		return fmt.Sprintf("%s subject %q", serverName(s.conn), s.subject)
	}
	id := streamIdentity(s.conn, s.js.stream)
	if len(s.js.filterSubjects) > 0 {
		id += " filter " + strings.Join(s.js.filterSubjects, ",")
	}
	return id
}

// SinkIdentity names what a sink's count (CountSink) counts and on which
// server, so that qbridge migrate does not run two pipelines at once whose
// counts would include each other's writes: the JetStream stream when the
// block names it, else the server alone (the stream that captures the
// subject is known only to the server, and may capture other sinks'
// subjects), or a core subject (which keeps nothing to count). An identity
// that begins another (the server alone) counts as the same.
func SinkIdentity(cfg SinkConfig) string {
	s, err := cfg.resolve()
	if err != nil {
		return "subject " + cfg.Subject // Validate refused it already
	}
	switch {
	case s.js == nil:
		return fmt.Sprintf("%s subject %q", serverName(s.conn), cfg.Subject)
	case s.js.stream != "":
		return streamIdentity(s.conn, s.js.stream)
	}
	return serverName(s.conn)
}

// streamIdentity names a JetStream stream on its server, as the
// identities and the counts' entities (driver.Backlog.Entity) do.
func streamIdentity(cc connConfig, stream string) string {
	return fmt.Sprintf("%s stream %q", serverName(cc), stream)
}

// serverName is "server HOST:PORT" (or "server ?" for a URL that cannot
// be normalized), as both identities begin.
func serverName(cc connConfig) string {
	if id, ok := serverIdentity(cc); ok {
		return "server " + id.desc
	}
	return "server ?"
}
