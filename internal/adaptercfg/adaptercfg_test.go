package adaptercfg

import (
	"strings"
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{"", 7 * time.Second, ""},
		{"250ms", 250 * time.Millisecond, ""},
		{"0s", 0, ""},
		{"30x", 0, `wait: "30x" is not a duration`},
		{"-1s", 0, `wait: must be zero or positive, not "-1s"`},
	}
	for _, tt := range tests {
		got, err := Duration("wait", tt.in, 7*time.Second)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: %s, %v", tt.in, got, err)
		}
	}
	if _, err := PositiveDuration("wait", "0s", time.Second); err == nil {
		t.Error("PositiveDuration accepted 0s")
	}
}

func TestTLSConfig(t *testing.T) {
	for _, tt := range []struct {
		tls     TLS
		wantErr string
	}{
		{TLS{ServerName: "x"}, ""},
		{TLS{CAFile: "/nonexistent"}, "tls.ca_file"},
		{TLS{CertFile: "a.pem"}, "tls.key_file: required"},
		{TLS{KeyFile: "a.key"}, "tls.cert_file: required"},
	} {
		tc, err := tt.tls.Config()
		if tt.wantErr == "" {
			if err != nil || tc.ServerName != "x" || tc.MinVersion == 0 {
				t.Errorf("%+v: %v", tt.tls, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%+v: err %v, want %q", tt.tls, err, tt.wantErr)
		}
	}
}
