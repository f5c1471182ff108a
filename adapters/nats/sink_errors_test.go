package nats

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/qbridge/qbridge/bridge/driver"
)

// A publish refused while the connection is down says so (it said
// "outbound buffer limit exceeded"), and may be retried.
func TestPublishErrWhileDown(t *testing.T) {
	err := publishErr(nats.ErrReconnectBufExceeded)
	if !strings.Contains(err.Error(), "the connection is down") || !errors.Is(err, nats.ErrReconnectBufExceeded) || driver.IsPermanent(err) {
		t.Errorf("%v (permanent %v)", err, driver.IsPermanent(err))
	}
	if err := publishErr(nats.ErrMaxPayload); !driver.IsPermanent(err) {
		t.Errorf("max payload: %v, want permanent", err)
	}
}
