package nats

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/qbridge/qbridge/internal/adaptercfg"
)

// serverURL is one server of a (comma-separated) NATS server URL list.
type serverURL struct {
	written string   // as written, trimmed
	u       *url.URL // as nats.go reads it: nats:// where no scheme is given
}

// splitServers splits a server URL list as nats.go does: at each ',',
// each entry trimmed of spaces (nats.go then skips the empty ones).
func splitServers(list string) []string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}

// serverURLs parses a server URL list as nats.go does, for the
// configuration's check and the servers' identities (serverIdentity),
// which read it by the same rules. An entry nats.go cannot parse (a
// password with an unencoded '#') failed at every connect, its error
// quoting the URL, password included, into the logs and /readyz; one with
// a path, or none or no host, was dialled for ever or skipped. Errors name
// the entry redacted (adaptercfg.RedactURL).
func serverURLs(list string) ([]serverURL, error) {
	var servers []serverURL
	for _, written := range splitServers(list) {
		if written == "" {
			return nil, fmt.Errorf("%q: an empty server URL (a ',' too many?)", redactURL(list))
		}
		if scheme, rest, ok := missingColon(written); ok {
			// nats.go reads "nats//h:4222" as the host "nats" and a path,
			// which holds the credentials: keep the scheme to show it.
			return nil, fmt.Errorf("%q: a path is not used by NATS (want nats://[user:password@]host:port; is the ':' after the scheme missing?)", scheme+"//"+adaptercfg.RedactURL(rest))
		}
		p := written
		if !strings.Contains(p, "://") {
			p = "nats://" + p
		}
		u, err := adaptercfg.ParseURL(p)
		if err != nil {
			return nil, err
		}
		switch {
		case u.Host == "":
			return nil, fmt.Errorf("%q: no host (want nats://[user:password@]host:port)", adaptercfg.RedactURL(written))
		case u.Path != "" && u.Path != "/" && u.Scheme != "ws" && u.Scheme != "wss":
			// nats.go ignores a path but a WebSocket's: "nats//h:4222" (a
			// colon left out) dialled the host "nats" for ever.
			return nil, fmt.Errorf("%q: a path is not used by NATS (want nats://[user:password@]host:port; is the ':' after the scheme missing?)", adaptercfg.RedactURL(written))
		}
		servers = append(servers, serverURL{written: written, u: u})
	}
	return servers, nil
}

// missingColon splits a server URL written as one of nats.go's schemes
// and "//", without the ':' between them ("nats//h:4222").
func missingColon(written string) (scheme, rest string, ok bool) {
	scheme, rest, ok = strings.Cut(written, "//")
	if !ok || strings.Contains(written, "://") {
		return "", "", false
	}
	switch strings.ToLower(scheme) {
	case "nats", "tls", "ws", "wss":
		return scheme, rest, true
	}
	return "", "", false
}

// redactURL hides passwords and tokens in a server URL list for logs.
func redactURL(list string) string {
	parts := splitServers(list)
	for i, p := range parts {
		parts[i] = adaptercfg.RedactURL(p)
	}
	return strings.Join(parts, ",")
}
