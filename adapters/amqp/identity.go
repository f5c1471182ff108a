package amqp

import (
	"fmt"
	"strings"
)

// SourceIdentity names the node a source reads and its brokers (no
// credentials), for qbridge migrate's copy checkpoints.
func SourceIdentity(cfg SourceConfig) string {
	s, err := cfg.resolve()
	if err != nil {
		return "address ?" // Validate refused it already
	}
	id := fmt.Sprintf("brokers %s address %q", strings.Join(brokerSet(s.conn), ","), s.address)
	if s.conn.hostname != "" {
		id += fmt.Sprintf(" hostname %q", s.conn.hostname)
	}
	return id
}

// SinkIdentity names the node a sink sends to and its brokers, as
// SourceIdentity does (qbridge migrate runs pipelines with the same sink
// identity one after the other). A templated address names the brokers
// alone.
func SinkIdentity(cfg SinkConfig) string {
	s, err := cfg.resolve()
	if err != nil {
		return "address ?" // Validate refused it already
	}
	id := "brokers " + strings.Join(brokerSet(s.conn), ",")
	if s.isStatic {
		id += fmt.Sprintf(" address %q", s.static)
	}
	if s.conn.hostname != "" {
		id += fmt.Sprintf(" hostname %q", s.conn.hostname)
	}
	return id
}
