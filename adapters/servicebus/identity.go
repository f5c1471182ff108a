package servicebus

import "strings"

// SourceIdentity names the entity a source reads and its namespace (no
// credentials), for qbridge migrate's copy checkpoints: a sequence number
// of one entity means nothing in another.
func SourceIdentity(cfg SourceConfig) string {
	s, err := cfg.resolve()
	if err != nil {
		// Validate refused it already; name what is written.
		return "entity " + cfg.Queue + cfg.Topic + "/" + cfg.Subscription
	}
	return "namespace " + strings.ToLower(s.conn.namespace) + " entity " + s.entityPath
}

// SinkIdentity names the entity a sink sends to and its namespace, as
// SourceIdentity does, so that qbridge migrate does not run two pipelines
// at once whose counts of one entity would include each other's writes. A
// templated entity names the namespace alone: it may send to any entity
// there.
func SinkIdentity(cfg SinkConfig) string {
	s, err := cfg.resolve()
	if err != nil {
		return "entity " + cfg.Queue + cfg.Topic // Validate refused it already
	}
	ns := "namespace " + strings.ToLower(s.conn.namespace)
	if entity, literal := s.entity.Literal(); literal {
		return ns + " entity " + entity
	}
	return ns
}
