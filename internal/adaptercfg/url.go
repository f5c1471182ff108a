package adaptercfg

import (
	"errors"
	"net/url"
	"strings"
)

// RedactURL hides the credentials of a server URL for logs and errors: a
// password becomes "xxxxx", and so does a user part without one (NATS
// reads a bare user part as a token). The rest is kept as written.
//
// The user part is kept only when url.Parse reads the URL's last '@' as
// the end of its userinfo. Otherwise (a password with an unencoded '#',
// '%', '/' or '?', which url.Parse fails on or reads as a host and a path,
// query or fragment: "nats://u:1234/s3cret@h" has the host "u:1234"),
// everything between the scheme's "//" and the last '@' is hidden.
func RedactURL(raw string) string {
	at := strings.LastIndexByte(raw, '@')
	if at < 0 {
		return raw // no user part
	}
	if u, err := url.Parse(raw); err == nil && u.User != nil && atEndsUserinfo(raw, at) {
		if _, ok := u.User.Password(); ok {
			// url.Parse has an authority, so the first "//" starts it,
			// and its user is what comes before the userinfo's first ':'.
			start := strings.Index(raw, "//") + 2
			colon := start + strings.IndexByte(raw[start:at], ':')
			return raw[:colon] + ":xxxxx" + raw[at:]
		}
	}
	return schemePrefix(raw[:at]) + "xxxxx" + raw[at:]
}

// atEndsUserinfo reports whether raw's '@' at index at (its last) lies in
// the authority that follows raw's first "//": nothing between them ends
// the authority ('/', '?' or '#'). With url.Parse's User set, url.Parse
// took the userinfo to end at that '@'.
func atEndsUserinfo(raw string, at int) bool {
	i := strings.Index(raw, "//")
	return i >= 0 && i+2 <= at && !strings.ContainsAny(raw[i+2:at], "/?#")
}

// schemePrefix is the "scheme://" (or "//") that s begins with, or "":
// what RedactURL keeps before the credentials it hides. Nothing else of s
// is kept, so nothing of a password can be.
func schemePrefix(s string) string {
	if strings.HasPrefix(s, "//") {
		return "//"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':' && strings.HasPrefix(s[i:], "://"):
			return s[:i+3]
		default:
			return ""
		}
	}
	return ""
}

// ParseURL is url.Parse whose error names the URL redacted (RedactURL):
// url.Parse's quotes it whole, password included, and says only what is
// wrong; this one also says how credentials must be written. A URL with
// a host and an '@' after it (in a path, query or fragment) is refused
// too: url.Parse reads "amqp://guest:5672/s3cret@broker" as the host
// "guest:5672", where a password has an unencoded '/'.
func ParseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err == nil {
		at := strings.LastIndexByte(raw, '@')
		if at < 0 || u.Host == "" && u.User == nil || atEndsUserinfo(raw, at) {
			return u, nil
		}
		err = errors.New("an '@' after the host")
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
