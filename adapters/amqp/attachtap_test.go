package amqp

import (
	"bytes"
	"encoding/binary"
	"io"
	"maps"
	"net"
	"testing"
)

// Encodings of the AMQP values the attach tests are made of.
func amqpSym(s string) []byte { return append([]byte{0xa3, byte(len(s))}, s...) }
func amqpStr(s string) []byte { return append([]byte{0xa1, byte(len(s))}, s...) }

func amqpList(fields ...[]byte) []byte {
	var body []byte
	for _, f := range fields {
		body = append(body, f...)
	}
	return append([]byte{0xc0, byte(len(body) + 1), byte(len(fields))}, body...)
}

// attachSource is a source whose distribution-mode is mode.
func attachSource(mode []byte) []byte {
	// address, durable, expiry-policy, timeout, dynamic, dynamic-node-properties, distribution-mode
	return append([]byte{0x00, 0x53, 0x28}, amqpList(amqpStr("/queue/q"), []byte{0x43}, amqpSym("session-end"), []byte{0x43}, []byte{0x42}, []byte{0x40}, mode)...)
}

// attachFields are an attach's first six fields: name, handle, role,
// snd-settle-mode, rcv-settle-mode, source.
func attachFields(name string, role byte, src []byte) [][]byte {
	return [][]byte{amqpStr(name), {0x43}, {role}, {0x50, 0x00}, {0x50, 0x00}, src}
}

func attachPerf(name string, role byte, src []byte) []byte {
	return append([]byte{0x00, 0x53, 0x12}, amqpList(attachFields(name, role, src)...)...)
}

// amqpFrame wraps a performative in an AMQP frame on channel 0.
func amqpFrame(body []byte) []byte {
	f := binary.BigEndian.AppendUint32(nil, uint32(8+len(body)))
	return append(append(f, 2, 0, 0, 0), body...)
}

// The attach parser reads the distribution-mode of the broker's reply.
func TestParseAttachReply(t *testing.T) {
	t.Parallel()
	copyMode := attachSource(amqpSym("copy"))
	// The list says it holds three fields' bytes; the other three follow
	// it: they are not the list's.
	f := attachFields("l9", 0x42, copyMode)
	boolRole := attachFields("l8", 0, copyMode)
	boolRole[2] = []byte{0x56, 0x00} // false: sender
	short := append([]byte{0x00, 0x53, 0x12, 0xc0, byte(len(f[0]) + len(f[1]) + len(f[2]) + 1), 6}, bytes.Join(f, nil)...)
	for _, tc := range []struct {
		name     string
		frame    []byte
		wantName string
		wantMode string
		ok       bool
	}{
		{"copy granted", attachPerf("l1", 0x42, copyMode), "l1", "copy", true},
		{"move", attachPerf("l2", 0x42, attachSource(amqpSym("move"))), "l2", "move", true},
		{"mode left out", attachPerf("l3", 0x42, attachSource([]byte{0x40})), "l3", "", true},
		{"no source", attachPerf("l4", 0x42, []byte{0x40}), "l4", "", true},
		{"our own attach (receiver role)", attachPerf("l5", 0x41, copyMode), "", "", false},
		{"not an attach", append([]byte{0x00, 0x53, 0x13}, amqpList([]byte{0x43})...), "", "", false},
		{"symbolic descriptor", append(append([]byte{0x00}, amqpSym("amqp:attach:list")...), amqpList(attachFields("l6", 0x42, copyMode)...)...), "l6", "copy", true},
		{"ulong descriptor", append([]byte{0x00, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x12}, amqpList(attachFields("l7", 0x42, copyMode)...)...), "l7", "copy", true},
		{"role as a boolean with its byte", append([]byte{0x00, 0x53, 0x12}, amqpList(boolRole...)...), "l8", "copy", true},
		{"fields past the list's size", short, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, mode, ok := parseAttachReply(tc.frame)
			if ok != tc.ok || name != tc.wantName || mode != tc.wantMode {
				t.Fatalf("got (%q, %q, %v), want (%q, %q, %v)", name, mode, ok, tc.wantName, tc.wantMode, tc.ok)
			}
		})
	}
}

// chunkConn hands out its bytes chunk bytes at a time.
type chunkConn struct {
	net.Conn
	r     *bytes.Reader
	chunk int
}

func (c *chunkConn) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.chunk)]) }

// tapAll passes stream through an attachTap, chunk bytes a read, and
// returns what it passed on and the modes it learnt.
func tapAll(t *testing.T, stream []byte, chunk int) ([]byte, map[string]string) {
	tap := newAttachTap(&chunkConn{r: bytes.NewReader(stream), chunk: chunk})
	var out []byte
	buf := make([]byte, 64)
	for {
		n, err := tap.Read(buf)
		out = append(out, buf[:n]...)
		if len(tap.buf) >= maxTapFrame {
			t.Fatalf("the tap holds %d bytes", len(tap.buf))
		}
		if err == io.EOF {
			return out, tap.modes
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzAttachTap: the tap reads whatever the broker sends without a panic,
// passes it on unchanged, holds less than maxTapFrame, and learns the same
// modes however the stream is cut into reads.
func FuzzAttachTap(f *testing.F) {
	header := []byte("AMQP\x00\x01\x00\x00")
	sasl := []byte("AMQP\x03\x01\x00\x00")
	reply := amqpFrame(attachPerf("l1", 0x42, attachSource(amqpSym("copy"))))
	for _, s := range [][]byte{
		append(header, reply...),
		append(append(sasl, header...), append(amqpFrame(nil), reply...)...), // a heartbeat first
		append(header, amqpFrame(attachPerf("l5", 0x41, attachSource(amqpSym("copy"))))...),
		append(header, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0), // a frame far too large to hold
		append(header, 0, 0, 0, 4, 2, 0, 0, 0),             // a size below 8
		reply[:len(reply)-3],
		{},
	} {
		f.Add(s, uint8(1))
		f.Add(s, uint8(7))
	}
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		out, whole := tapAll(t, stream, len(stream)+1)
		if !bytes.Equal(out, stream) {
			t.Fatalf("the tap changed the stream: %x, want %x", out, stream)
		}
		if _, cut := tapAll(t, stream, int(chunk%16)+1); !maps.Equal(cut, whole) {
			t.Fatalf("modes read in chunks of %d: %v, at once: %v", chunk%16+1, cut, whole)
		}
	})
}
