package adaptercfg

import (
	"errors"
	"net/url"
	"strings"
)

// RedactURL hides the credentials of a server URL for logs and errors: a
// password becomes "xxxxx", and so does a user part without one (NATS
// reads a bare user part as a token). A URL that does not parse (a
// password with an unencoded '#' or '%'), or has no host, loses
// everything between its scheme and its last '@'.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil && u.Host == "" {
		// Not a URL with a host, or none at all ("user:pass@host" parses
		// as scheme "user"): hide what comes before an '@'.
		at := strings.LastIndex(raw, "@")
		if at < 0 {
			return raw
		}
		scheme := ""
		if i := strings.Index(raw[:at], "://"); i >= 0 {
			scheme = raw[:i+3]
		}
		return scheme + "xxxxx" + raw[at:]
	}
	if u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	} else {
		u.User = url.User("xxxxx")
	}
	return u.String()
}

// ParseURL is url.Parse whose error names the URL redacted (RedactURL):
// url.Parse's quotes it whole, password included, and says only what is
// wrong; this one also says how credentials must be written.
func ParseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err == nil {
		return u, nil
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ee url.EscapeError
	if errors.As(err, &ee) {
		// It quotes the escape, which may be a piece of the password.
		err = errors.New("an invalid %-escape")
	}
	hint := ""
	if strings.Contains(raw, "@") {
		hint = " (a user, password or token with any of : / ? # [ ] @ % must be percent-encoded: # as %23, % as %25)"
		// url.Parse quotes what it could not read: with a "#" in a
		// password it took the rest for the host (`invalid port
		// ":s3cret" after host`), a piece of the password.
		err = errors.New("not a valid URL")
	}
	return nil, errors.New(`"` + RedactURL(raw) + `": ` + err.Error() + hint)
}
