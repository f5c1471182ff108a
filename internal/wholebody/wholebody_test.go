package wholebody

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// lateBody is a request body whose last read (the one that would see its
// end) waits until it is closed, and then fails, as a body closed by
// smithy-go right after Do returns does when net/http's write loop is
// still reading it.
type lateBody struct {
	data   *strings.Reader
	closed chan struct{}
}

func (b *lateBody) Read(p []byte) (int, error) {
	if b.data.Len() > 0 {
		return b.data.Read(p)
	}
	<-b.closed
	return 0, errors.New("read on a closed request body")
}

func (b *lateBody) Close() error {
	select {
	case <-b.closed:
	default:
		close(b.closed)
	}
	return nil
}

// signalConn reports when net/http closes it.
type signalConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *signalConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// The server answers as soon as it has the request; the caller closes the
// request body as soon as Do returns and only then reads the response, as
// the SDK does. net/http's write loop, still reading the request body to
// check that nothing follows its length, fails and closes the connection:
// without Wrap the response body is read from a closed connection, with it
// the body was read before Do returned.
func TestResponseReadBeforeTheRequestBodyIsClosed(t *testing.T) {
	payload := bytes.Repeat([]byte("x"), 1<<20) // more than the client buffers on its own
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(payload)
	}))
	defer srv.Close()

	exchange := func(wrap bool) error {
		conns := make(chan *signalConn, 1)
		tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			sc := &signalConn{Conn: c, closed: make(chan struct{})}
			conns <- sc
			return sc, nil
		}}
		defer tr.CloseIdleConnections()
		var c Doer = &http.Client{Transport: tr}
		if wrap {
			c = Wrap(c)
		}
		const doc = `{"QueueUrl":"q"}`
		body := &lateBody{data: strings.NewReader(doc), closed: make(chan struct{})}
		req, err := http.NewRequest(http.MethodPost, srv.URL, body)
		if err != nil {
			t.Fatal(err)
		}
		// A known length, as the SDK sends: the server has the whole
		// request and answers, while net/http reads the body once more.
		req.ContentLength = int64(len(doc))
		resp, err := c.Do(req)
		_ = body.Close() // smithy-go's ClientHandler does this as Do returns
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		select { // the write loop's failure closes the connection
		case <-(<-conns).closed:
		case <-time.After(10 * time.Second):
			t.Fatal("the connection was not closed after the request body")
		}
		got, err := io.ReadAll(resp.Body)
		if err == nil && !bytes.Equal(got, payload) {
			err = errors.New("response body differs")
		}
		return err
	}
	if err := exchange(true); err != nil {
		t.Fatalf("with Wrap: %v", err)
	}
	if err := exchange(false); err == nil {
		t.Error("without Wrap the response survived: the test does not reproduce the failure it guards against")
	} else {
		t.Logf("without Wrap: %v", err)
	}
}
