package sbrest

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/qbridge/qbridge/mapping"
)

// Lock is the lock of a peek-locked message, from the response's Location
// header: https://{ns}/{entity}/messages/{messageId|sequenceNumber}/{lockToken}.
// DELETE on URL completes the message, PUT unlocks (abandons) it, POST
// renews the lock.
type Lock struct {
	URL        string
	Entity     string // e.g. "orders" or "events/subscriptions/audit"
	MessageRef string // the message id or sequence number segment
	LockToken  string // canonical UUID
}

// ParseLocation parses the Location header of a peek-lock response.
func ParseLocation(loc string) (Lock, error) {
	u, err := url.Parse(loc)
	if err != nil {
		return Lock{}, fmt.Errorf("lock location %q: %w", loc, err)
	}
	segs := strings.Split(strings.Trim(u.EscapedPath(), "/"), "/")
	n := len(segs)
	if n < 4 || segs[n-3] != "messages" {
		return Lock{}, fmt.Errorf("lock location %q: want .../{entity}/messages/{id}/{lock token}", loc)
	}
	tok, err := mapping.ParseUUID(segs[n-1])
	if err != nil {
		return Lock{}, fmt.Errorf("lock location %q: lock token: %w", loc, err)
	}
	entity, err := url.PathUnescape(strings.Join(segs[:n-3], "/"))
	if err != nil {
		return Lock{}, fmt.Errorf("lock location %q: %w", loc, err)
	}
	ref, err := url.PathUnescape(segs[n-2])
	if err != nil {
		return Lock{}, fmt.Errorf("lock location %q: %w", loc, err)
	}
	return Lock{URL: loc, Entity: entity, MessageRef: ref, LockToken: mapping.UUIDString(tok)}, nil
}

// LockLocation reads the lock of a peek-lock response from its headers.
// ok is false when there is no Location header (receive-and-delete).
func LockLocation(h http.Header) (l Lock, ok bool, err error) {
	loc := h.Get(hdrLocation)
	if loc == "" {
		return Lock{}, false, nil
	}
	l, err = ParseLocation(loc)
	return l, err == nil, err
}
