package amqpguard

import (
	"bytes"
	"io"
	"net"
	"testing"

	"github.com/Azure/go-amqp"
)

// streamConn replays one recorded byte stream per Read call sequence: the
// socket side of a guard, without the kernel.
type streamConn struct {
	net.Conn
	r *bytes.Reader
}

func (c *streamConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// BenchmarkGuardStream is the guard's cost on the receive path: a stream of
// 256 transfers (1 KiB body, 10 string application properties, the
// message docs/adapter-amqp.md measures) read through the guard in 64 KiB
// reads, as go-amqp's connection reader does, against the same stream read
// directly and against go-amqp decoding each message (what its receiver
// pays per message anyway). ns/op is per message.
func BenchmarkGuardStream(b *testing.B) {
	ap := map[string]any{}
	for i := 0; i < 10; i++ {
		ap[string(rune('a'+i))+"-prop"] = "value-of-the-property"
	}
	payload := marshal(b, &amqp.Message{Header: &amqp.MessageHeader{Durable: true}, Properties: &amqp.MessageProperties{MessageID: "id"},
		ApplicationProperties: ap, Data: [][]byte{make([]byte, 1024)}})
	const perStream = 256
	stream := []byte("AMQP\x00\x01\x00\x00")
	for i := 0; i < perStream; i++ {
		stream = append(stream, transferFrame(0, 1, uint32(i), false, false, payload)...)
	}
	buf := make([]byte, 64<<10)
	read := func(b *testing.B, wrap func(net.Conn) net.Conn) {
		b.SetBytes(int64(len(stream) / perStream))
		b.ReportAllocs()
		conn := &streamConn{r: bytes.NewReader(stream)}
		c := wrap(conn)
		for i := 0; i < b.N; i++ {
			if i%perStream == 0 {
				conn.r.Reset(stream)
				c = wrap(conn) // a stream starts with the protocol header
			}
			// one message's worth of bytes per iteration, on average
			if i%perStream == perStream-1 {
				for {
					if _, err := c.Read(buf); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	}
	b.Run("direct", func(b *testing.B) { read(b, func(c net.Conn) net.Conn { return c }) })
	b.Run("guard-scan", func(b *testing.B) {
		read(b, func(c net.Conn) net.Conn { return Wrap(c, Options{Log: NewLog(), KeepRaw: true}) })
	})
	b.Run("guard-full", func(b *testing.B) {
		read(b, func(c net.Conn) net.Conn { return Wrap(c, Options{Full: true, Log: NewLog(), KeepRaw: true}) })
	})
	b.Run("go-amqp-unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var m amqp.Message
			if err := m.UnmarshalBinary(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}
