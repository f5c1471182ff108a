// Package amqpguard protects go-amqp receivers from messages go-amqp cannot
// decode. A Wrap'ped net.Conn sits between the network and go-amqp on
// receiving connections. It parses the incoming AMQP frames and, for every complete
// transfer (a message, possibly spread over several frames), checks that
// go-amqp can decode the payload: with the cheap scan (Suspect) and, when
// the scan is not sure or in full mode, with go-amqp's own decoder. A payload
// that fails is replaced by a stub message (the original header and
// properties when they decode, plus a marker message annotation) and the
// reason (and, with Options.KeepRaw, the original bytes) recorded in the Log. The transfer itself (delivery id, tag,
// settlement, handle) is left as it was, so go-amqp's link and flow state stay
// right and the source can Reject exactly that delivery. Without the guard,
// go-amqp closes the link with amqp:internal-error "decimal128 not
// implemented" and the broker redelivers the same message at the head of the
// queue forever; on an annotations map keyed by a list or map it even panics
// in its own goroutine, killing the process (the guard decodes under recover).
//
// Frames of a delivery split over several transfers are held back (with every
// frame after them, to keep order) until its last transfer arrives.
package amqpguard

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/Azure/go-amqp"
)

// MarkerAnnotation is the message annotation of a stub; its value names the
// Log entry that holds the reason.
const MarkerAnnotation = "x-opt-qbridge-undecodable"

const markerKey = MarkerAnnotation

const maxPoisonEntries = 4096

// maxLogRaw bounds the original payloads a Log holds for stubs not yet
// matched (a stub whose link died is never matched): beyond it the oldest
// entries lose their Raw.
const maxLogRaw = 64 << 20

// Info is what the guard learnt about a payload it replaced.
type Info struct {
	// Reason names the section and the type go-amqp cannot decode, e.g.
	// "application-properties: decimal128 not implemented by go-amqp".
	Reason string
	Size   int // bytes of the original payload
	// Raw is the original payload, every section exactly as it came in the
	// transfer frames (header, annotations, properties, application
	// properties, body, footer), when Options.KeepRaw asked for it and it
	// was within Options.MaxRaw; nil otherwise.
	Raw []byte
}

// Log maps stub markers to the reasons; shared by the guards of one
// source. A stub whose link dies before the source reads it leaves an entry
// behind: the log is bounded.
type Log struct {
	nonce string
	mu    sync.Mutex
	seq   uint64
	m     map[uint64]Info
	order []uint64
	raw   int // bytes of Raw held in m
}

// NewLog returns an empty Log.
func NewLog() *Log {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Log{nonce: hex.EncodeToString(b[:]), m: map[uint64]Info{}}
}

func (l *Log) add(info Info) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	l.m[l.seq] = info
	l.raw += len(info.Raw)
	l.order = append(l.order, l.seq)
	for len(l.order) > maxPoisonEntries {
		l.raw -= len(l.m[l.order[0]].Raw)
		delete(l.m, l.order[0])
		l.order = l.order[1:]
	}
	// Over the byte bound, the oldest entries (but never the new one) keep
	// their reason and lose their payload.
	for i := 0; l.raw > maxLogRaw && i < len(l.order)-1; i++ {
		if e, ok := l.m[l.order[i]]; ok && e.Raw != nil {
			l.raw -= len(e.Raw)
			e.Raw = nil
			l.m[l.order[i]] = e
		}
	}
	return l.nonce + "/" + strconv.FormatUint(l.seq, 10)
}

// Match reports whether a message with these message annotations (an
// amqp.Message's Annotations, or the Service Bus SDK's
// AMQPAnnotatedMessage.MessageAnnotations) is a stub of this log, and takes
// its entry.
func (l *Log) Match(annotations map[any]any) (Info, bool) {
	if len(annotations) == 0 {
		return Info{}, false
	}
	v, ok := annotations[markerKey]
	if !ok {
		v, ok = annotations[amqp.Symbol(markerKey)]
	}
	s, _ := v.(string)
	if !ok || !strings.HasPrefix(s, l.nonce+"/") {
		return Info{}, false
	}
	seq, err := strconv.ParseUint(s[len(l.nonce)+1:], 10, 64)
	if err != nil {
		return Info{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	info, ok := l.m[seq]
	if !ok {
		info = Info{Reason: "the AMQP client cannot decode the message (details no longer known)"}
	}
	l.raw -= len(info.Raw)
	delete(l.m, seq)
	return info, true
}

type linkKey struct {
	channel uint16
	handle  uint32
}

// heldFrame is a complete frame waiting for the deliveries before it.
type heldFrame struct {
	b          []byte // the whole frame
	payloadOff int    // transfer payload offset in b; 0 when not a transfer
}

// Options configure Wrap.
type Options struct {
	// Full runs go-amqp's decoder on every payload; otherwise only on those
	// the cheap scan (Suspect) is not sure of.
	Full bool
	// Log records the reasons; required.
	Log *Log
	// OnPoison is told about every replaced payload (for logs and counts).
	OnPoison func(reason string, size int)
	// Check, when set, vets every payload that go-amqp can decode (or that
	// the scan calls clean) for what the client on top of go-amqp cannot
	// take; an error replaces the payload with a stub like a decode
	// failure. It must be cheap for ordinary payloads.
	Check func(payload []byte) error
	// KeepRaw keeps a copy of every replaced payload in its Log entry
	// (Info.Raw), for a dead-letter copy that loses nothing. Only replaced
	// payloads are copied: good ones cost nothing more.
	KeepRaw bool
	// MaxRaw bounds the payloads KeepRaw keeps (larger ones: Raw is nil);
	// 0 keeps any size, i.e. as large as the receiving link accepts (the
	// guard holds a whole delivery anyway to check it).
	MaxRaw int
}

// Wrap returns c guarded: the net.Conn to give to go-amqp.
func Wrap(c net.Conn, opt Options) net.Conn {
	g := newGuard(c, opt.Full, opt.Log, opt.OnPoison)
	g.extra = opt.Check
	g.keepRaw, g.maxRaw = opt.KeepRaw, opt.MaxRaw
	return g
}

// guard is the net.Conn given to go-amqp.
type guard struct {
	net.Conn
	full bool
	log  *Log
	// onPoison is told about every replaced payload (for logs and counts).
	onPoison func(reason string, size int)
	extra    func(payload []byte) error
	keepRaw  bool
	maxRaw   int

	in          []byte
	out         []byte
	outOff      int
	rerr        error
	passthrough bool // stop interpreting: unknown framing, TLS negotiated in-band
	pending     map[linkKey][]int
	held        []heldFrame
}

func newGuard(c net.Conn, full bool, log *Log, onPoison func(string, int)) *guard {
	return &guard{Conn: c, full: full, log: log, onPoison: onPoison, pending: map[linkKey][]int{}}
}

func (g *guard) Read(p []byte) (int, error) {
	for {
		if g.outOff < len(g.out) {
			n := copy(p, g.out[g.outOff:])
			g.outOff += n
			if g.outOff == len(g.out) {
				g.out, g.outOff = g.out[:0], 0
			}
			return n, nil
		}
		if g.rerr != nil {
			return 0, g.rerr
		}
		if cap(g.in)-len(g.in) < 16<<10 {
			grown := make([]byte, len(g.in), 2*cap(g.in)+32<<10)
			copy(grown, g.in)
			g.in = grown
		}
		n, err := g.Conn.Read(g.in[len(g.in):cap(g.in)])
		g.in = g.in[:len(g.in)+n]
		g.process()
		if err != nil {
			g.rerr = err
		}
	}
}

// process moves every complete unit of g.in to g.out or g.held.
func (g *guard) process() {
	i := 0
	for {
		rest := g.in[i:]
		if g.passthrough {
			g.out = append(g.out, rest...)
			i = len(g.in)
			break
		}
		u, size := NextUnit(rest)
		if u == UnitPartial {
			break
		}
		switch u {
		case UnitHeader:
			// id 2 is in-band TLS: no longer readable
			if rest[4] == 2 {
				g.flushHeld()
				g.passthrough = true
			}
			g.emit(rest[:size], 0)
		case UnitInvalid:
			g.flushHeld()
			g.passthrough = true
			continue
		case UnitFrame:
			g.frame(rest[:size])
		}
		i += size
	}
	n := copy(g.in, g.in[i:])
	g.in = g.in[:n]
}

// emit outputs a frame, or holds it while a split delivery is incomplete.
func (g *guard) emit(b []byte, payloadOff int) {
	if len(g.pending) == 0 && len(g.held) == 0 {
		g.out = append(g.out, b...)
		return
	}
	g.held = append(g.held, heldFrame{b: append([]byte(nil), b...), payloadOff: payloadOff})
}

func (g *guard) flushHeld() {
	for _, h := range g.held {
		g.out = append(g.out, h.b...)
	}
	g.held = g.held[:0]
	clear(g.pending)
}

func (g *guard) frame(f []byte) {
	body, ok := FrameBody(f) // not a SASL frame, a bad offset or a heartbeat
	var t transferInfo
	if ok {
		t, ok = parseTransfer(body)
	}
	if !ok {
		g.emit(f, 0)
		return
	}
	payloadOff := len(f) - len(body) + t.perfLen
	key := linkKey{binary.BigEndian.Uint16(f[6:8]), t.handle}
	parts, inProgress := g.pending[key]
	switch {
	case t.aborted:
		delete(g.pending, key)
		g.emit(f, payloadOff)
	case t.more:
		g.held = append(g.held, heldFrame{b: append([]byte(nil), f...), payloadOff: payloadOff})
		g.pending[key] = append(parts, len(g.held)-1)
	case !inProgress:
		if stub, ok := g.check(f[payloadOff:]); !ok {
			f = withPayload(f, payloadOff, stub)
		}
		g.emit(f, payloadOff)
	default:
		g.held = append(g.held, heldFrame{b: append([]byte(nil), f...), payloadOff: payloadOff})
		parts = append(parts, len(g.held)-1)
		delete(g.pending, key)
		var payload []byte
		for _, idx := range parts {
			h := g.held[idx]
			payload = append(payload, h.b[h.payloadOff:]...)
		}
		if stub, ok := g.check(payload); !ok {
			for n, idx := range parts {
				h := &g.held[idx]
				var p []byte
				if n == 0 {
					p = stub
				}
				h.b = withPayload(h.b, h.payloadOff, p)
			}
		}
	}
	if len(g.pending) == 0 && len(g.held) > 0 {
		g.flushHeld()
	}
}

// check returns ok, or the stub that replaces an undecodable payload.
func (g *guard) check(payload []byte) (stub []byte, ok bool) {
	var err error
	if g.full || scanSuspect(payload) {
		if err = decodeCheck(payload); err != nil {
			err = diagnose(payload, err)
		}
	}
	if err == nil && g.extra != nil {
		err = g.extra(payload)
	}
	if err == nil {
		return nil, true
	}
	reason := err.Error()
	if g.onPoison != nil {
		g.onPoison(reason, len(payload))
	}
	info := Info{Reason: reason, Size: len(payload)}
	if g.keepRaw && (g.maxRaw <= 0 || len(payload) <= g.maxRaw) {
		// payload may alias the read buffer: copy it
		info.Raw = append(make([]byte, 0, len(payload)), payload...)
	}
	return makeStub(payload, g.log.add(info)), false
}

// sectionNames are the message sections by their descriptor code 0x70..0x78.
var sectionNames = [...]string{"header", "delivery-annotations", "message-annotations", "properties",
	"application-properties", "data", "amqp-sequence", "amqp-value", "footer"}

// diagnose names the section go-amqp fails on: err, the failure on the whole
// payload, becomes "application-properties: decimal128 not implemented by
// go-amqp". When no section fails on its own, err is returned as it is.
func diagnose(payload []byte, err error) error {
	for p := payload; len(p) > 3 && p[0] == 0 && p[1] == 0x53; {
		n, ok := SkipValue(p)
		if !ok {
			break
		}
		if code := p[2]; code >= 0x70 && code <= 0x78 {
			if serr := decodeCheck(p[:n]); serr != nil {
				msg := serr.Error()
				if strings.HasSuffix(msg, " not implemented") {
					msg += " by go-amqp"
				}
				return fmt.Errorf("%s: %s", sectionNames[code-0x70], msg)
			}
		}
		p = p[n:]
	}
	return err
}

// decodeCheck runs go-amqp's decoder; a panic in it counts as a failure.
func decodeCheck(payload []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("go-amqp panicked decoding it: %v", r)
		}
	}()
	var m amqp.Message
	return m.UnmarshalBinary(payload)
}

// makeStub keeps the header, delivery-annotations, message-annotations and
// properties sections when each decodes on its own (for the logs and for
// settlement: message-id, delivery-count, a lock token, a broker's
// sequence number) and adds the marker to the message annotations.
func makeStub(payload []byte, marker string) []byte {
	var header, dann, mann, props []byte
	for p := payload; len(p) > 3 && p[0] == 0 && p[1] == 0x53; {
		n, ok := SkipValue(p)
		if !ok {
			break
		}
		if sec := p[:n]; decodeCheck(sec) == nil {
			switch p[2] {
			case 0x70:
				header = sec
			case 0x71:
				dann = sec
			case 0x72:
				mann = sec
			case 0x73:
				props = sec
			}
		}
		p = p[n:]
	}
	ann := stubAnnotations(mann, marker)
	stub := make([]byte, 0, len(header)+len(dann)+len(ann)+len(props))
	stub = append(stub, header...)
	stub = append(stub, dann...)
	stub = append(stub, ann...)
	return append(stub, props...)
}

// stubAnnotations is the message-annotations section of a stub: the
// original annotations (when they re-encode) plus the marker.
func stubAnnotations(section []byte, marker string) []byte {
	only := func() []byte {
		b, err := (&amqp.Message{Annotations: amqp.Annotations{amqp.Symbol(markerKey): marker}}).MarshalBinary()
		if err != nil { // cannot happen with a string value
			return nil
		}
		return b
	}
	if section == nil {
		return only()
	}
	var m amqp.Message
	if err := m.UnmarshalBinary(section); err != nil || m.Annotations == nil {
		return only()
	}
	delete(m.Annotations, markerKey) // a forged marker
	delete(m.Annotations, amqp.Symbol(markerKey))
	m.Annotations[amqp.Symbol(markerKey)] = marker
	b, err := (&amqp.Message{Annotations: m.Annotations}).MarshalBinary()
	if err != nil { // e.g. a key type go-amqp decodes but does not encode
		return only()
	}
	return b
}

// withPayload returns frame f with its payload replaced and its size fixed.
func withPayload(f []byte, payloadOff int, payload []byte) []byte {
	out := make([]byte, 0, payloadOff+len(payload))
	out = append(out, f[:payloadOff]...)
	out = append(out, payload...)
	binary.BigEndian.PutUint32(out, uint32(len(out)))
	return out
}

type transferInfo struct {
	handle        uint32
	more, aborted bool
	perfLen       int // length of the performative; the payload follows
}

// parseTransfer reads the fields the guard needs from a frame body that
// holds a transfer performative; ok is false for any other body.
func parseTransfer(b []byte) (transferInfo, bool) {
	var t transferInfo
	fields, count, n, ok := DescribedList(b, 0x14, "amqp:transfer:list")
	var f [10][]byte // handle ... aborted
	if ok {
		_, ok = ListFields(fields, count, f[:])
	}
	if !ok || count == 0 { // handle is mandatory
		return t, false
	}
	if t.handle, ok = readUint(f[0]); !ok {
		return t, false
	}
	if f[5] != nil {
		t.more, _ = ReadBool(f[5])
	}
	if f[9] != nil {
		t.aborted, _ = ReadBool(f[9])
	}
	t.perfLen = n
	return t, true
}

func readUint(v []byte) (uint32, bool) {
	switch v[0] {
	case 0x43:
		return 0, true
	case 0x52:
		return uint32(v[1]), true
	case 0x70:
		return binary.BigEndian.Uint32(v[1:5]), true
	}
	return 0, false
}
