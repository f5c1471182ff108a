package servicebus

import (
	"strings"
	"testing"
)

// The parse errors quote the mistake, so that the user can find it, and
// never a key or a signature, even one pasted into the wrong field.
func TestParseConnStringErrors(t *testing.T) {
	const key = "c2VjcmV0LWtleS0xMjM0NTY3ODkw"
	for _, tc := range []struct {
		name, in    string
		want, never string
	}{
		{"endpoint not a URL", "Endpoint=myns;SharedAccessKeyName=k;SharedAccessKey=" + key,
			`Endpoint "myns": want sb://`, key},
		{"key pasted as the endpoint", "Endpoint=" + key + ";SharedAccessKeyName=k;SharedAccessKey=" + key,
			`Endpoint "…": want sb://`, key},
		{"signature in the emulator flag", "Endpoint=sb://x/;UseDevelopmentEmulator=sig0123456789;SharedAccessSignature=SharedAccessSignature sr=a&sig=sig0123456789&se=1",
			`UseDevelopmentEmulator "…": want true or false`, "sig0123456789"},
		{"part without =", "Endpoint=sb://x/;" + key + ";SharedAccessKeyName=k;SharedAccessKey=" + key,
			"is not key=value", key},
		{"short key stays readable", "Endpoint=abc;SharedAccessKeyName=k;SharedAccessKey=abc",
			`Endpoint "abc"`, ""},
		{"no credentials", "Endpoint=sb://x/", "required", ""},
		{"both credentials", "Endpoint=sb://x/;SharedAccessKeyName=k;SharedAccessKey=" + key + ";SharedAccessSignature=SharedAccessSignature sr=a&sig=b&se=1",
			"set one", key},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := parseConnString(tc.in)
			if err == nil {
				t.Fatalf("parsed: %+v", cs)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
			if tc.never != "" && strings.Contains(err.Error(), tc.never) {
				t.Errorf("error %q quotes the secret", err)
			}
		})
	}
}
