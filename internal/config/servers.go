package config

import (
	"log/slog"
	"slices"
)

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
// A server's Hold holds it for the first block that names it and for each
// of its later source blocks: a source's hold may prepare what apps use
// before the pipeline opens (a JetStream source's create_stream makes its
// stream).
func (c *Config) Servers() []Server {
	type hold = func(log *slog.Logger) (string, func(), error)
	var out []Server
	var holds [][]hold       // by index in out
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
		h := func(log *slog.Logger) (string, func(), error) { return k.holdServer(role, cfg, orDefault(log)) }
		if i, ok := seen[key]; ok {
			if role == "source" {
				holds[i] = append(holds[i], h)
			}
			return
		}
		seen[key] = len(out)
		out = append(out, Server{Key: key, Settings: settings, Described: described})
		holds = append(holds, []hold{h})
	}
	for _, p := range c.Pipelines {
		add("source", &p.Spec.Source)
		add("sink", &p.Spec.Sink)
		if p.Spec.DeadLetter.Sink != nil {
			add("sink", p.Spec.DeadLetter.Sink)
		}
	}
	for i := range out {
		out[i].Hold = holdAll(holds[i])
	}
	return out
}

// holdAll holds in turn what hs hold, answering with where the first
// listens; one that fails releases those before it.
func holdAll(hs []func(log *slog.Logger) (string, func(), error)) func(log *slog.Logger) (string, func(), error) {
	return func(log *slog.Logger) (string, func(), error) {
		var where string
		var releases []func()
		release := func() {
			for _, r := range slices.Backward(releases) {
				r()
			}
		}
		for i, h := range hs {
			w, r, err := h(log)
			if err != nil {
				release()
				return "", nil, err
			}
			if i == 0 {
				where = w
			}
			if r != nil {
				releases = append(releases, r)
			}
		}
		return where, release, nil
	}
}
