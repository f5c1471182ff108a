//go:build linux

package servicebus

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"
)

// A long poll read by the server together with its client's close (a
// source closed while the server was busy, its request read only after a
// message arrived) takes nothing: the message stays available, on its
// first delivery. TCP_CORK makes the request and the FIN one segment, so
// the server always reads them together.
func TestHTTPSPollReadWithItsCloseTakesNothing(t *testing.T) {
	needTestServer(t)
	t.Parallel()
	q := entity("rest-gone-raw")
	emptyQueue(t, q)
	snk, _ := newTestSink(t, SinkConfig{Queue: q})
	sendAll(t, snk, textMsg("waiting"))

	cc := restConn(t)
	set, err := cc.resolve()
	if err != nil {
		t.Fatal(err)
	}
	c := newRESTClient(set, nil)
	authz, err := c.auth.authorization(context.Background(), c.resource(q))
	if err != nil {
		t.Fatal(err)
	}
	base, err := url.Parse(c.base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", base.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tc := conn.(*net.TCPConn)
	raw, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, 1)
	}); err != nil || serr != nil {
		t.Fatalf("TCP_CORK: %v %v", err, serr)
	}
	req := fmt.Sprintf("POST /%s/messages/head?timeout=5 HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nContent-Length: 0\r\n\r\n",
		escapePath(q), base.Host, authz)
	if _, err := io.WriteString(tc, req); err != nil {
		t.Fatal(err)
	}
	if err := tc.CloseWrite(); err != nil { // the FIN joins the corked request
		t.Fatal(err)
	}
	// Whatever the server answers (or none), it has dealt with the request
	// once it closes its side.
	_ = tc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, tc); err != nil {
		t.Fatalf("waiting for the server to close: %v", err)
	}

	src, _ := newTestSource(t, SourceConfig{Queue: q, MaxMessages: 1})
	d := receiveN(t, src, 1, 3*time.Second)[0]
	if d.Message().ID != "waiting" || d.Message().Source.DeliveryCount != 1 {
		t.Fatalf("got %s on delivery %d, want waiting on its first", d.Message().ID, d.Message().Source.DeliveryCount)
	}
	ack(t, d)
}
