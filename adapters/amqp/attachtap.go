package amqp

import (
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

// maxTapFrame bounds what the tap buffers: a frame declared larger is no
// attach reply it waits for (it stops reading the stream instead).
const maxTapFrame = 1 << 26

// scan consumes whole frames and protocol headers from buf.
func (t *attachTap) scan() {
	for {
		u, size := amqpguard.NextUnit(t.buf)
		switch {
		case u == amqpguard.UnitPartial && size <= maxTapFrame:
			return
		case u == amqpguard.UnitHeader:
		case u == amqpguard.UnitFrame:
			if body, ok := amqpguard.FrameBody(t.buf[:size]); ok {
				if name, mode, ok := parseAttachReply(body); ok {
					t.modes[name] = mode
				}
			}
		default: // not a frame stream we understand, or too large a frame
			t.done, t.buf = true, nil
			return
		}
		t.buf = t.buf[size:]
	}
}

// parseAttachReply reads an attach performative sent by the broker for a
// receiver of ours (role = sender): the link name and its source's
// distribution-mode (AMQP 1.0 part 3 §3.5.3, field 7 of source).
func parseAttachReply(b []byte) (name, mode string, ok bool) {
	fields, count, _, ok := amqpguard.DescribedList(b, 0x12, "amqp:attach:list")
	var f [6][]byte // name, handle, role, snd-settle-mode, rcv-settle-mode, source
	if ok {
		var n int
		n, ok = amqpguard.ListFields(fields, count, f[:])
		ok = ok && n == len(f)
	}
	if !ok {
		return "", "", false
	}
	name, ok = amqpguard.ReadString(f[0])
	if role, isBool := amqpguard.ReadBool(f[2]); !ok || !isBool || role {
		return "", "", false // not the sender's side of a link
	}
	src, scount, _, ok := amqpguard.DescribedList(f[5], 0x28, "amqp:source:list")
	var sf [7][]byte // address ... distribution-mode
	if ok {
		var n int
		n, ok = amqpguard.ListFields(src, scount, sf[:])
		ok = ok && n == len(sf)
	}
	if !ok {
		return name, "", true // no source, or no mode: nothing granted
	}
	mode, _ = amqpguard.ReadString(sf[6])
	return name, mode, true
}
