package servicebus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/qbridge/qbridge/bridge/driver"
)

// The HTTPS transport speaks the Service Bus REST data plane
// (docs/wire-servicebus.md §7) with net/http: send and batch send
// (POST {entity}/messages), peek-lock (POST {entity}/messages/head),
// complete (DELETE), unlock (PUT) and renew (POST) on the lock URL that
// the peek-lock response's Location gives.

// maxResponseBody bounds what a response body may hold (REST messages are
// at most 1 MB).
const maxResponseBody = 4 << 20

// restClient sends authorized requests to the namespace.
type restClient struct {
	base      string // scheme://host[:port] requests go to
	namespace string // the namespace authorization names
	auth      authorizer
	http      *http.Client
}

func newRESTClient(c *connSettings, cred azcore.TokenCredential) *restClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	return &restClient{base: c.baseURL, namespace: c.namespace, auth: newAuthorizer(c, cred), http: &http.Client{Transport: tr}}
}

// escapePath escapes each segment of an entity path.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// resource is the URI a SAS token or bearer token is for: the entity
// (a token for a URI is valid for every URI below it).
func (c *restClient) resource(entity string) string {
	return "https://" + c.namespace + "/" + entity
}

// restError is a non-success response.
type restError struct {
	op     string
	status int
	body   string
}

func (e *restError) Error() string {
	msg := strings.TrimSpace(e.body)
	if len(msg) > 512 {
		msg = truncate(msg, 512) + "…"
	}
	if msg != "" {
		msg = ": " + msg
	}
	return fmt.Sprintf("servicebus-https: %s: %d %s%s", e.op, e.status, http.StatusText(e.status), msg)
}

func statusOf(err error) int {
	var re *restError
	if errors.As(err, &re) {
		return re.status
	}
	return 0
}

// restFatal says a receive cannot go on: bad credentials, no such entity,
// a request the service refuses (a session-enabled entity, say).
func restFatal(err error) bool {
	switch statusOf(err) {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusGone, http.StatusMethodNotAllowed:
		return true
	}
	return false
}

// restPermanent says a send cannot succeed by retrying: a message the
// service refuses (400), too large (413, or 403 naming the size), no such
// entity (404, 410: a template that named one). A 403 without a size
// reason is a quota and worth retrying. 401 is not the message's: a key
// that does not sign refuses every message, and dead-lettering each one
// (an audit's whole queue) is no answer; the send is retried, and the
// pipeline stalls (stall_after) and says why.
func restPermanent(err error) bool {
	var re *restError
	if !errors.As(err, &re) {
		return false
	}
	switch re.status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusGone, http.StatusRequestEntityTooLarge:
		return true
	case http.StatusForbidden:
		b := strings.ToLower(re.body)
		return strings.Contains(b, "size") || strings.Contains(b, "too large")
	}
	return false
}

// do sends one request on the entity; it returns the response with its
// body read, or a *restError when the status is not one of ok.
func (c *restClient) do(ctx context.Context, op, method, u, entity string, h http.Header, body []byte, ok ...int) (*http.Response, []byte, error) {
	authz, err := c.auth.authorization(ctx, c.resource(entity))
	if err != nil {
		return nil, nil, fmt.Errorf("servicebus-https: %s: %w", op, err)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("servicebus-https: %s: %w", op, err)
	}
	for k, v := range h {
		req.Header[k] = v // as given: custom property names are not canonicalized
	}
	req.Header.Set("Authorization", authz)
	if body == nil {
		req.ContentLength = 0
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("servicebus-https: %s: %w", op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody+1))
	if err != nil {
		return nil, nil, fmt.Errorf("servicebus-https: %s: reading the response: %w", op, err)
	}
	if len(data) > maxResponseBody {
		return nil, nil, fmt.Errorf("servicebus-https: %s: response body over %d bytes", op, maxResponseBody)
	}
	for _, s := range ok {
		if resp.StatusCode == s {
			return resp, data, nil
		}
	}
	return nil, nil, &restError{op: op, status: resp.StatusCode, body: string(data)}
}

// lockURL rebuilds a peek-lock response's Location on the base URL (the
// path is the service's; the host may be a configured endpoint).
func (c *restClient) lockURL(location string) (string, error) {
	u, err := url.Parse(location)
	if err != nil || u.EscapedPath() == "" {
		return "", fmt.Errorf("servicebus-https: lock location %q: not a URL", location)
	}
	return c.base + u.EscapedPath(), nil
}

// settleErr explains a failed settlement over HTTPS.
func restSettleErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if s := statusOf(err); s == http.StatusNotFound || s == http.StatusGone {
		return fmt.Errorf("servicebus-https: %s: the lock was lost or the message is gone; it is (or will be) delivered again: %w", op, err)
	}
	return err
}

// sinkErr classifies a send error over HTTPS.
func (s *sinkCommon) restSendErr(entity string, err error) error {
	switch {
	case err == nil:
		return nil
	case restPermanent(err):
		return driver.Permanent(fmt.Errorf("servicebus-https: %s: %w", entity, sessionHint(err)))
	case restThrottled(err):
		return driver.Throttled(fmt.Errorf("servicebus-https: %s: %w", entity, err))
	}
	return fmt.Errorf("servicebus-https: %s: %w", entity, err)
}

// timeoutParam is the ?timeout= value of a long poll: whole seconds.
func timeoutParam(d time.Duration) string {
	return fmt.Sprint(int64(max(d/time.Second, 1)))
}
