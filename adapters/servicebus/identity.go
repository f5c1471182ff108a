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
