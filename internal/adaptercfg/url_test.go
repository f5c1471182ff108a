package adaptercfg

import (
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://alice:secret@127.0.0.1:4222", "nats://alice:xxxxx@127.0.0.1:4222"},
		{"nats://TOKEN123@127.0.0.1:4222", "nats://xxxxx@127.0.0.1:4222"},
		{"amqps://bob:p%40ss@broker.example:5671", "amqps://bob:xxxxx@broker.example:5671"},
		// Unencoded # or %: url.Parse fails; nothing of the credentials stays.
		{"nats://alice:p#SECRETX@127.0.0.1:4222", "nats://xxxxx@127.0.0.1:4222"},
		{"amqp://bob:p%zzSECRETX@127.0.0.1:5672", "amqp://xxxxx@127.0.0.1:5672"},
		{"bob:p%zzSECRETX@127.0.0.1:5672", "xxxxx@127.0.0.1:5672"},
	} {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseURLErrorHidesCredentials(t *testing.T) {
	for _, raw := range []string{"nats://alice:p#SECRETX@127.0.0.1:4222", "nats://alice:SECRETX#y@127.0.0.1:4222", "amqp://bob:p%zzSECRETX@127.0.0.1:5672", "amqp://bob:%SE@127.0.0.1:5672"} {
		_, err := ParseURL(raw)
		if err == nil || strings.Contains(err.Error(), "SE") || !strings.Contains(err.Error(), "percent-encoded") {
			t.Errorf("ParseURL(%q): %v", raw, err)
		}
	}
	if u, err := ParseURL("amqp://127.0.0.1:5672"); err != nil || u.Host != "127.0.0.1:5672" {
		t.Errorf("%v %v", u, err)
	}
}
