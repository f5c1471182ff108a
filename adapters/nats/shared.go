package nats

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// EmbeddedServer is, for a block with embedded = true, the server it
// shares with every other block on the same store_dir (one server per
// store, started by the first to open): key is the store directory,
// settings what must be the same in each, described the settings without
// the secrets, and listen the address it takes where that is fixed
// (127.0.0.1:port; "" for a random port). key is "" for a block that
// connects to a server.
func EmbeddedServer(c ConnConfig) (key, settings, described, listen string) {
	cc, err := c.resolve()
	if err != nil || !cc.Embedded {
		return "", "", "", ""
	}
	if cc.Port != 0 {
		listen = fmt.Sprintf("127.0.0.1:%d", cc.Port)
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
	return cc.StoreDir, settings, described, listen
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

// HoldEmbeddedSource is HoldEmbedded for a source block, which also makes
// the source's stream (create_stream) once the server listens. The stream
// is what an app publishes into: made only when the source opened, after
// its pipeline's sink, it was missing while the sink could not open (a
// sidecar's SQS unreachable at pod start), and the app's publishes were
// refused ("no stream captures subject") while the spool was there to
// hold them. A stream that cannot be made here is left to the source's
// open, which says why.
func HoldEmbeddedSource(c SourceConfig, log *slog.Logger) (url string, release func(), err error) {
	url, release, err = HoldEmbedded(c.ConnConfig, log)
	if err != nil || release == nil {
		return url, release, err
	}
	set, err := c.resolve()
	if err != nil || set.js == nil || !set.js.createStream || set.js.noCreate {
		return url, release, nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(context.Background(), set.conn.ConnectTimeout+5*time.Second)
	defer cancel()
	conn, err := dialAt(ctx, set.conn, log, slog.LevelDebug)
	if err != nil {
		log.Warn("nats: the source's stream is made when the source opens", "stream", set.js.stream, "error", err)
		return url, release, nil
	}
	defer conn.close()
	js, err := jetstream.New(conn.nc)
	if err == nil {
		_, err = ensureStream(ctx, js, set.js.stream, true, set.js.streamConfig(), log)
	}
	if err != nil {
		log.Warn("nats: the source's stream is made when the source opens", "stream", set.js.stream, "error", err)
	}
	return url, release, nil
}
