package amqp

import (
	"encoding/binary"
	"net"
	"sync"

	"github.com/qbridge/qbridge/internal/amqpguard"
)

// attachTap reads the broker's attach frames as they pass, to learn the
// source distribution-mode the broker granted a receiver link: go-amqp
// keeps only the filters of the attach reply (Receiver.LinkSourceFilterValue).
// It parses frames only until it saw the reply for the link it waits for;
// then it is a plain pass-through.
type attachTap struct {
	net.Conn

	mu    sync.Mutex
	buf   []byte
	done  bool
	modes map[string]string // link name -> distribution-mode ("" when absent)
}

func newAttachTap(c net.Conn) *attachTap { return &attachTap{Conn: c, modes: map[string]string{}} }

func (t *attachTap) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	if n > 0 {
		t.mu.Lock()
		if !t.done {
			t.buf = append(t.buf, p[:n]...)
			t.scan()
		}
		t.mu.Unlock()
	}
	return n, err
}

// mode returns the distribution-mode of the broker's attach for link name.
func (t *attachTap) mode(name string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ok := t.modes[name]
	if ok {
		t.done, t.buf = true, nil // nothing more to learn on this connection
	}
	return m, ok
}

// scan consumes whole frames from buf (AMQP 1.0 part 2 §2.3.1: size,
// doff, type, channel) and protocol headers ("AMQP" and 4 bytes).
func (t *attachTap) scan() {
	for {
		if len(t.buf) >= 8 && string(t.buf[:4]) == "AMQP" {
			t.buf = t.buf[8:]
			continue
		}
		if len(t.buf) < 8 {
			return
		}
		size := binary.BigEndian.Uint32(t.buf)
		if size < 8 || size > 1<<26 {
			t.done, t.buf = true, nil // not a frame stream we understand
			return
		}
		if uint32(len(t.buf)) < size {
			return
		}
		f := t.buf[:size]
		if doff := int(f[4]) * 4; f[5] == 0 && doff >= 8 && doff < len(f) {
			if name, mode, ok := parseAttachReply(f[doff:]); ok {
				t.modes[name] = mode
			}
		}
		t.buf = t.buf[size:]
	}
}

// parseAttachReply reads an attach performative sent by the broker for a
// receiver of ours (role = sender): the link name and its source's
// distribution-mode (AMQP 1.0 part 3 §3.5.3, field 7 of source).
func parseAttachReply(b []byte) (name, mode string, ok bool) {
	b, ok = describedList(b, 0x12)
	if !ok {
		return "", "", false
	}
	fields, ok := listFields(b, 6)
	if !ok || len(fields) < 6 {
		return "", "", false
	}
	name, ok = amqpString(fields[0])
	if !ok || len(fields[2]) == 0 || !(fields[2][0] == 0x42 || (fields[2][0] == 0x56 && len(fields[2]) > 1 && fields[2][1] == 0)) {
		return "", "", false // not the sender's side of a link
	}
	src, ok := describedList(fields[5], 0x28)
	if !ok {
		return name, "", true // no source: nothing granted
	}
	sf, ok := listFields(src, 7)
	if !ok || len(sf) < 7 {
		return name, "", true
	}
	mode, _ = amqpString(sf[6])
	return name, mode, true
}

// describedList returns the list body of a value described by the small
// ulong code, or of a described list with an 8-byte ulong descriptor.
func describedList(b []byte, code byte) ([]byte, bool) {
	switch {
	case len(b) >= 3 && b[0] == 0x00 && b[1] == 0x53 && b[2] == code:
		return b[3:], true
	case len(b) >= 10 && b[0] == 0x00 && b[1] == 0x80 && binary.BigEndian.Uint64(b[2:10]) == uint64(code):
		return b[10:], true
	}
	return nil, false
}

// listFields splits the first max fields of the list at b's start.
func listFields(b []byte, max int) ([][]byte, bool) {
	if len(b) == 0 {
		return nil, false
	}
	var count, off int
	switch b[0] {
	case 0x45:
		return nil, true
	case 0xc0:
		if len(b) < 3 {
			return nil, false
		}
		count, off = int(b[2]), 3
	case 0xd0:
		if len(b) < 9 {
			return nil, false
		}
		count, off = int(binary.BigEndian.Uint32(b[5:9])), 9
	default:
		return nil, false
	}
	var out [][]byte
	for i := 0; i < count && i < max; i++ {
		n, ok := amqpguard.SkipValue(b[off:])
		if !ok {
			return nil, false
		}
		out = append(out, b[off:off+n])
		off += n
	}
	return out, true
}

// amqpString reads a str8/str32/sym8/sym32 value; null is "".
func amqpString(b []byte) (string, bool) {
	if len(b) == 0 {
		return "", false
	}
	switch b[0] {
	case 0x40:
		return "", true
	case 0xa1, 0xa3:
		if len(b) >= 2 {
			return string(b[2:]), true
		}
	case 0xb1, 0xb3:
		if len(b) >= 5 {
			return string(b[5:]), true
		}
	}
	return "", false
}
