package nats

import (
	"fmt"
	"log/slog"
	"sync"
)

// EmbeddedServer is, for a block with embedded = true, the server it
// shares with every other block on the same store_dir (one server per
// store, started by the first to open): key is the store directory,
// settings what must be the same in each, and described the settings
// without the secrets. key is "" for a block that connects to a server.
func EmbeddedServer(c ConnConfig) (key, settings, described string) {
	cc, err := c.resolve()
	if err != nil || !cc.Embedded {
		return "", "", ""
	}
	settings = fmt.Sprintf("%d\x00%s\x00%s\x00%s", cc.Port, cc.User, cc.Password, cc.Token)
	described = "no port (a random one)"
	if cc.Port != 0 {
		described = fmt.Sprintf("port %d", cc.Port)
	}
	switch {
	case cc.User != "":
		described += fmt.Sprintf(", user %q", cc.User)
	case cc.Token != "":
		described += ", a token"
	default:
		described += ", no credentials"
	}
	return cc.StoreDir, settings, described
}

// HoldEmbedded starts, or joins, the embedded server c names and returns
// once it accepts connections, with its client URL and the release of this
// hold. The daemon holds each embedded server from its start, so that the
// server listens while a pipeline using it still waits for its other side
// (an unreachable Service Bus or SQS): the apps of a sidecar connect to it
// before the bridge does. A c that is not embedded holds nothing: release
// is nil, and so is the error.
func HoldEmbedded(c ConnConfig, log *slog.Logger) (url string, release func(), err error) {
	cc, err := c.resolve()
	if err != nil {
		return "", nil, err
	}
	if !cc.Embedded {
		return "", nil, nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e, err := acquireEmbedded(cc, log)
	if err != nil {
		return "", nil, err
	}
	return e.url(), sync.OnceFunc(e.release), nil
}
