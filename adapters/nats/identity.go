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
	server := "server ?"
	if id, ok := serverIdentity(s.conn); ok {
		server = "server " + id.desc
	}
	if s.js == nil {
		return fmt.Sprintf("%s subject %q", server, s.subject)
	}
	id := fmt.Sprintf("%s stream %q", server, s.js.stream)
	if len(s.js.filterSubjects) > 0 {
		id += " filter " + strings.Join(s.js.filterSubjects, ",")
	}
	return id
}
