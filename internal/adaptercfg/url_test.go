package adaptercfg

import (
	"regexp"
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://alice:secret@127.0.0.1:4222", "nats://alice:xxxxx@127.0.0.1:4222"},
		{"nats://TOKEN123@127.0.0.1:4222", "nats://xxxxx@127.0.0.1:4222"},
		{"amqps://bob:p%40ss@broker.example:5671", "amqps://bob:xxxxx@broker.example:5671"},
		{"nats://alice:p@ss@h:4222", "nats://alice:xxxxx@h:4222"},
		{"//alice:secret@h", "//alice:xxxxx@h"},
		{"nats://[::1]:4222", "nats://[::1]:4222"},
		{"nats://u:SECRETX@[::1]:4222/", "nats://u:xxxxx@[::1]:4222/"},
		// Unencoded # or %: url.Parse fails; nothing of the credentials stays.
		{"nats://alice:p#SECRETX@127.0.0.1:4222", "nats://xxxxx@127.0.0.1:4222"},
		{"amqp://bob:p%zzSECRETX@127.0.0.1:5672", "amqp://xxxxx@127.0.0.1:5672"},
		{"bob:p%zzSECRETX@127.0.0.1:5672", "xxxxx@127.0.0.1:5672"},
		// A password of digits, then an unencoded / ? or #: url.Parse reads
		// the user and the digits as host:port and the rest as a path,
		// query or fragment; nothing of the credentials stays either.
		{"nats://u:1234?SECRETX@host:4222", "nats://xxxxx@host:4222"},
		{"nats://u:1234#SECRETX@host:4222", "nats://xxxxx@host:4222"},
		{"amqp://guest:5672/SECRETX@broker", "amqp://xxxxx@broker"},
		{"nats://tok123/SECRETX@host", "nats://xxxxx@host"},
		{"nats://a@b:1234/SECRETX@host", "nats://xxxxx@host"},
		{"nats://u:SECRETX@h:4222/p@x", "nats://xxxxx@x"},
		// No scheme (or not one): only a "scheme://" before them is kept.
		{"u:SECRETX@h", "xxxxx@h"},
		{"SECRETX//x@h", "xxxxx@h"},
		{"nats//u:SECRETX@h", "xxxxx@h"},
		{"SECRETX:x//y@h", "xxxxx@h"},
		{"nats:SECRETX@h", "xxxxx@h"},
	} {
		got := RedactURL(tc.in)
		if got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "SECRETX") || strings.Contains(got, "1234") {
			t.Errorf("RedactURL(%q) = %q: shows the password", tc.in, got)
		}
	}
}

func TestParseURLErrorHidesCredentials(t *testing.T) {
	for _, raw := range []string{
		"nats://alice:p#SECRETX@127.0.0.1:4222", "nats://alice:SECRETX#y@127.0.0.1:4222", "amqp://bob:p%zzSECRETX@127.0.0.1:5672", "amqp://bob:%SE@127.0.0.1:5672",
		// url.Parse reads these without error, as a host and a path, query
		// or fragment.
		"amqp://guest:5672/SECRETX@broker", "nats://u:1234?SECRETX@host:4222", "nats://u:1234#SECRETX@host:4222", "nats://tok123/SECRETX@host",
		"nats://a@b:1234/SECRETX@host",
	} {
		_, err := ParseURL(raw)
		if err == nil || strings.Contains(err.Error(), "SE") || !strings.Contains(err.Error(), "percent-encoded") {
			t.Errorf("ParseURL(%q): %v", raw, err)
		}
	}
	for _, raw := range []string{"amqp://127.0.0.1:5672", "amqp://u:p@127.0.0.1:5672/", "wss://h/nats?x=1", "nats//u:p@h", "u:p@h"} {
		if _, err := ParseURL(raw); err != nil {
			t.Errorf("ParseURL(%q): %v", raw, err)
		}
	}
	if u, err := ParseURL("amqp://127.0.0.1:5672"); err != nil || u.Host != "127.0.0.1:5672" {
		t.Errorf("%v %v", u, err)
	}
}

// redactedScheme is what RedactURL may keep of a URL's start, at most.
var redactedScheme = regexp.MustCompile(`^(?:(?:[A-Za-z][A-Za-z0-9+.-]*:)?//)?`)

// FuzzRedactURL checks, for any input, that RedactURL shows of what comes
// before the input's last '@' at most a "scheme://" and the text before
// the first ':' after it (a user), then "xxxxx", and keeps the rest as
// written; and that ParseURL's error quotes the input only so redacted.
func FuzzRedactURL(f *testing.F) {
	for _, s := range []string{
		"nats://127.0.0.1:4222", "nats://alice:secret@127.0.0.1:4222", "nats://TOKEN@h", "amqps://bob:p%40ss@broker:5671",
		"nats://alice:p#s@h", "amqp://bob:p%zzs@h", "bob:p%zz@h", "nats://u:1234?secret@host:4222", "amqp://guest:5672/s3cret@broker",
		"nats://tok123/abc@host", "nats//u:s@h", "//u:p@h", "nats://a@b:1234/s@h", "nats://u:p@[::1]:4222",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out := RedactURL(raw)
		at := strings.LastIndexByte(raw, '@')
		if at < 0 {
			if out != raw {
				t.Fatalf("RedactURL(%q) = %q, want it unchanged", raw, out)
			}
		} else {
			head, ok := strings.CutSuffix(out, raw[at:])
			if !ok {
				t.Fatalf("RedactURL(%q) = %q: does not end with %q", raw, out, raw[at:])
			}
			if head, ok = strings.CutSuffix(head, "xxxxx"); !ok {
				t.Fatalf("RedactURL(%q) = %q: no xxxxx before the last '@'", raw, out)
			}
			// head is a "scheme://" of raw, or that, a user and ':'.
			user, ok := strings.CutPrefix(head, redactedScheme.FindString(raw[:at]))
			if !ok || !strings.HasPrefix(raw, head) {
				t.Fatalf("RedactURL(%q) = %q: keeps %q", raw, out, head)
			}
			if user != "" {
				if user, ok = strings.CutSuffix(user, ":"); !ok || strings.ContainsAny(user, ":/?#") {
					t.Fatalf("RedactURL(%q) = %q: keeps %q, more than a user", raw, out, head)
				}
			}
		}
		if _, err := ParseURL(raw); err != nil && at >= 0 {
			rest, ok := strings.CutPrefix(err.Error(), `"`+out+`": `)
			if !ok || !strings.HasPrefix(rest, "not a valid URL (") {
				t.Fatalf("ParseURL(%q) = %q: says more than %q is not valid", raw, err, out)
			}
		}
	})
}
