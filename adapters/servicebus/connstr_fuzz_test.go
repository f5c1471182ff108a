package servicebus

import (
	"strings"
	"testing"
)

var connStringSeeds = []string{
	"Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=abc=",
	"Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=a2V5;UseDevelopmentEmulator=true",
	"Endpoint=sb://localhost:5673;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true",
	"Endpoint=sb://x/",
	"Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=secret;SharedAccessSignature=SharedAccessSignature sr=a&sig=b&se=1",
	"Endpoint=sb://myns.servicebus.windows.net/;SharedAccessSignature=SharedAccessSignature sr=https%3a%2f%2fmyns.servicebus.windows.net%2forders&sig=c2ln&se=1700000000&skn=send",
	"Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=s;EntityPath=orders",
	"Endpoint=https://myns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=s;UseDevelopmentEmulator=true",
	";;  ;",
	"nokeyvalue",
}

// secretsOf are the values a parse error must not quote: the key and the
// token's signature, where long enough not to turn up by chance.
func secretsOf(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case strings.EqualFold(k, "SharedAccessKey"):
			out = append(out, v)
		case strings.EqualFold(k, "SharedAccessSignature"):
			for _, kv := range strings.Split(v, "&") {
				if n, sig, ok := strings.Cut(kv, "="); ok && n == "sig" {
					out = append(out, sig)
				}
			}
		}
	}
	long := out[:0]
	for _, v := range out {
		if len(v) >= 8 {
			long = append(long, v)
		}
	}
	return long
}

// parseConnString never panics, either fails or returns what the callers
// rely on, gives the same answer twice, and never quotes the key or the
// signature in its error.
func FuzzParseConnString(f *testing.F) {
	for _, s := range connStringSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := parseConnString(s)
		cs2, err2 := parseConnString(s)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("two parses disagree: %v / %v", err, err2)
		}
		if err != nil {
			if cs != nil {
				t.Fatalf("an error (%v) and a result", err)
			}
			for _, secret := range secretsOf(s) {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error quotes a secret: %v", err)
				}
			}
			return
		}
		if *cs != *cs2 {
			t.Fatalf("two parses disagree: %+v / %+v", cs, cs2)
		}
		switch {
		case cs.fqdn == "":
			t.Fatal("no host, no error")
		case cs.sas == "" && (cs.key == "" || cs.keyName == ""):
			t.Fatal("no credentials, no error")
		case cs.sas != "" && cs.key != "":
			t.Fatal("both a key and a token, no error")
		case cs.sas != "" && cs.sasExpiry.IsZero():
			t.Fatal("a token without its expiry")
		}
		hostPort(cs.fqdn, "5671") // must not panic either
	})
}

// sasExpiry never panics, and reads se= only from a token with sr, sig and se.
func FuzzSASExpiry(f *testing.F) {
	f.Add("SharedAccessSignature sr=a&sig=b&se=1")
	f.Add("SharedAccessSignature sr=https%3a%2f%2fmyns.servicebus.windows.net%2forders&sig=c2ln&se=1700000000&skn=send")
	f.Add("SharedAccessSignature sr=a&sig=b")
	f.Add("SharedAccessSignature sr=a&sig=b&se=soon")
	f.Add("sr=a&sig=b&se=1")
	f.Add("SharedAccessSignature %zz")
	f.Fuzz(func(t *testing.T, tok string) {
		exp, err := sasExpiry(tok)
		if err != nil {
			if !exp.IsZero() {
				t.Fatalf("an error (%v) and an expiry", err)
			}
			return
		}
		if !strings.HasPrefix(tok, "SharedAccessSignature ") {
			t.Fatalf("%q: accepted without the prefix", tok)
		}
		for _, k := range []string{"sr=", "sig=", "se="} {
			if !strings.Contains(tok, k) {
				t.Fatalf("%q: accepted without %s", tok, k)
			}
		}
	})
}
