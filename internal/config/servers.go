package config

import "log/slog"

// Server is a server the configuration starts in the process and its
// blocks share (an embedded NATS server), one per key.
type Server struct {
	// Key names it (an embedded NATS server's store_dir); Settings are
	// what every block with the key has the same (the load checks that),
	// Described says them without secrets.
	Key, Settings, Described string
	// Hold starts or joins it and returns once it accepts connections,
	// with where it listens and the release of the hold.
	Hold func(log *slog.Logger) (where string, release func(), err error)
}

// Servers are the servers the configuration's adapter blocks start, in
// the order the blocks come.
func (c *Config) Servers() []Server {
	var out []Server
	seen := map[string]bool{}
	add := func(role string, a *Adapter) {
		k := lookupKind(a.Kind)
		if k == nil || k.server == nil || k.holdServer == nil {
			return
		}
		key, settings, described := k.server(role, a.Config)
		if key == "" || seen[key] {
			return
		}
		seen[key] = true
		cfg := a.Config
		out = append(out, Server{Key: key, Settings: settings, Described: described,
			Hold: func(log *slog.Logger) (string, func(), error) { return k.holdServer(role, cfg, orDefault(log)) }})
	}
	for _, p := range c.Pipelines {
		add("source", &p.Spec.Source)
		add("sink", &p.Spec.Sink)
		if p.Spec.DeadLetter.Sink != nil {
			add("sink", p.Spec.DeadLetter.Sink)
		}
	}
	return out
}
