package nats

import "fmt"

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
