package sbconformance

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// sasToken signs like the Go SDK (docs/wire-servicebus.md §3.2).
func sasToken(resource, name, key string, expiry time.Time) string {
	sr := strings.ToLower(url.QueryEscape(resource))
	se := fmt.Sprint(expiry.Unix())
	h := hmac.New(sha256.New, []byte(key))
	h.Write([]byte(sr + "\n" + se))
	sig := url.QueryEscape(base64.StdEncoding.EncodeToString(h.Sum(nil)))
	return fmt.Sprintf("SharedAccessSignature sr=%s&sig=%s&se=%s&skn=%s", sr, sig, se, name)
}

func sasConnStr(token string) string {
	return fmt.Sprintf("Endpoint=sb://localhost:%d;SharedAccessSignature=%s;UseDevelopmentEmulator=true", serverPort, token)
}

func expectUnauthorized(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: want an authorization error, got success", what)
	}
	if sbCode(err) != azservicebus.CodeUnauthorizedAccess {
		t.Fatalf("%s: want code %q, got %v", what, azservicebus.CodeUnauthorizedAccess, err)
	}
}

// CBS put-token verifies the SAS signature, the expiry, the resource and
// the rights of the rule (§3.1, §3.2).
func TestAuthorization(t *testing.T) {
	requireServer(t)
	t.Parallel()
	ns := fmt.Sprintf("sb://localhost:%d/", serverPort)

	// wrong key
	bad := newClientWith(t, connStr("not-the-key"))
	expectUnauthorized(t, "wrong key", newSender(t, bad, "auth").SendMessage(ctxFor(t, 10*time.Second), &azservicebus.Message{Body: []byte("x")}, nil))

	// a pre-built namespace token with the right key works
	good := newClientWith(t, sasConnStr(sasToken(ns, keyName, keyVal, time.Now().Add(time.Hour))))
	must(t, "send with a valid SAS", newSender(t, good, "auth").SendMessage(ctxFor(t, 10*time.Second), &azservicebus.Message{Body: []byte("ok")}, nil))

	// expired token
	expired := newClientWith(t, sasConnStr(sasToken(ns, keyName, keyVal, time.Now().Add(-time.Minute))))
	expectUnauthorized(t, "expired token", newSender(t, expired, "auth").SendMessage(ctxFor(t, 10*time.Second), &azservicebus.Message{Body: []byte("x")}, nil))

	// forged: signed with another key
	forged := newClientWith(t, sasConnStr(sasToken(ns, keyName, "forged", time.Now().Add(time.Hour))))
	expectUnauthorized(t, "forged token", newSender(t, forged, "auth").SendMessage(ctxFor(t, 10*time.Second), &azservicebus.Message{Body: []byte("x")}, nil))

	// a token for another entity does not cover this one
	other := newClientWith(t, sasConnStr(sasToken(ns+"basic", keyName, keyVal, time.Now().Add(time.Hour))))
	expectUnauthorized(t, "token for another entity", newSender(t, other, "auth").SendMessage(ctxFor(t, 10*time.Second), &azservicebus.Message{Body: []byte("x")}, nil))

	// an entity-level rule with Listen only: receive yes, send no, other entities no
	listen := newClientWith(t, fmt.Sprintf("Endpoint=sb://localhost:%d;SharedAccessKeyName=listenonly;SharedAccessKey=listen-only-key;UseDevelopmentEmulator=true", serverPort))
	r := newReceiver(t, listen, "auth", nil)
	m := receiveN(t, r, 1, 10*time.Second)[0]
	mustEqual(t, "body", string(m.Body), "ok")
	must(t, "complete with Listen", r.CompleteMessage(ctxFor(t, 5*time.Second), m, nil))
	expectUnauthorized(t, "send with a Listen-only rule", newSender(t, listen, "auth").SendMessage(ctxFor(t, 10*time.Second), &azservicebus.Message{Body: []byte("x")}, nil))
	_, err := newReceiver(t, listen, "basic", nil).PeekMessages(ctxFor(t, 10*time.Second), 1, nil)
	expectUnauthorized(t, "entity rule used on another entity", err)
}
