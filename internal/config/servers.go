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
//
// A server's Hold holds it for each of its source blocks too, after the
// first block's hold: a source's hold may prepare what apps use before the
// pipeline opens (a JetStream source's create_stream makes its stream).
func (c *Config) Servers() []Server {
	var out []Server
	seen := map[string]int{} // key → index in out
	add := func(role string, a *Adapter) {
		k := lookupKind(a.Kind)
		if k == nil || k.server == nil || k.holdServer == nil {
			return
		}
		key, settings, described, _ := k.server(role, a.Config)
		if key == "" {
			return
		}
		cfg := a.Config
		hold := func(log *slog.Logger) (string, func(), error) { return k.holdServer(role, cfg, orDefault(log)) }
		i, ok := seen[key]
		if !ok {
			seen[key] = len(out)
			out = append(out, Server{Key: key, Settings: settings, Described: described, Hold: hold})
			return
		}
		if role != "source" {
			return
		}
		first := out[i].Hold
		out[i].Hold = func(log *slog.Logger) (string, func(), error) {
			where, release, err := first(log)
			if err != nil {
				return where, release, err
			}
			_, more, err := hold(log)
			if err != nil {
				if release != nil {
					release()
				}
				return "", nil, err
			}
			return where, func() {
				if more != nil {
					more()
				}
				if release != nil {
					release()
				}
			}, nil
		}
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
