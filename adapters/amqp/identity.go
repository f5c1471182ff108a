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
