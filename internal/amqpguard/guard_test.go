package amqpguard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/Azure/go-amqp"
)

// transferFrame encodes an AMQP frame holding a transfer performative
// (handle, delivery-id, delivery-tag, message-format, settled, more) and the
// payload, the way a broker sends it.
func transferFrame(channel uint16, handle, deliveryID uint32, more, aborted bool, payload []byte) []byte {
	var fields []byte
	u32 := func(v uint32) { fields = append(fields, 0x70); fields = binary.BigEndian.AppendUint32(fields, v) }
	boolean := func(v bool) {
		if v {
			fields = append(fields, 0x41)
		} else {
			fields = append(fields, 0x42)
		}
	}
	count := uint32(6)
	u32(handle)
	u32(deliveryID)
	fields = append(fields, 0xa0, 4)
	fields = binary.BigEndian.AppendUint32(fields, deliveryID)
	u32(0)
	boolean(false)
	boolean(more)
	if aborted {
		fields = append(fields, 0x40, 0x40, 0x40, 0x41) // rcv-settle-mode, state, resume: null; aborted
		count = 10
	}
	perf := []byte{0x00, 0x53, 0x14, 0xd0}
	perf = binary.BigEndian.AppendUint32(perf, uint32(4+len(fields)))
	perf = binary.BigEndian.AppendUint32(perf, count)
	perf = append(perf, fields...)
	return frame(channel, append(perf, payload...))
}

func frame(channel uint16, body []byte) []byte {
	f := binary.BigEndian.AppendUint32(nil, uint32(8+len(body)))
	f = append(f, 2, 0)
	f = binary.BigEndian.AppendUint16(f, channel)
	return append(f, body...)
}

// flowFrame is some non-transfer performative (a flow).
func flowFrame(channel uint16) []byte {
	return frame(channel, []byte{0x00, 0x53, 0x13, 0x45})
}

type parsedFrame struct {
	channel uint16
	t       transferInfo
	isXfer  bool
	payload []byte
	raw     []byte
}

// readFrames splits the guard's output back into frames (protocol headers
// are returned as raw units).
func readFrames(t *testing.T, b []byte) []parsedFrame {
	t.Helper()
	var out []parsedFrame
	for len(b) > 0 {
		if bytes.HasPrefix(b, []byte("AMQP")) {
			out = append(out, parsedFrame{raw: b[:8]})
			b = b[8:]
			continue
		}
		size := binary.BigEndian.Uint32(b)
		f := b[:size]
		b = b[size:]
		pf := parsedFrame{channel: binary.BigEndian.Uint16(f[6:]), raw: f}
		doff := int(f[4]) * 4
		if f[5] == 0 && doff < len(f) {
			if ti, ok := parseTransfer(f[doff:]); ok {
				pf.t, pf.isXfer, pf.payload = ti, true, f[doff+ti.perfLen:]
			}
		}
		out = append(out, pf)
	}
	return out
}

// runGuard pushes input through a guard (keeping raw payloads) in chunks of
// chunk bytes and returns everything it lets out, and the reasons it
// recorded.
func runGuard(t *testing.T, full bool, input []byte, chunk int) ([]byte, *Log, []string) {
	t.Helper()
	return runGuardOpt(t, Options{Full: full, KeepRaw: true}, input, chunk)
}

func runGuardOpt(t *testing.T, opt Options, input []byte, chunk int) ([]byte, *Log, []string) {
	t.Helper()
	a, b := net.Pipe()
	log := NewLog()
	var reasons []string
	opt.Log = log
	opt.OnPoison = func(r string, _ int) { reasons = append(reasons, r) }
	g := Wrap(b, opt)
	go func() {
		for i := 0; i < len(input); i += chunk {
			_, _ = a.Write(input[i:min(i+chunk, len(input))])
		}
		a.Close()
	}()
	out, err := io.ReadAll(g)
	if err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return out, log, reasons
}

func stubMessage(t *testing.T, log *Log, payload []byte) (*amqp.Message, Info) {
	t.Helper()
	var m amqp.Message
	if err := m.UnmarshalBinary(payload); err != nil {
		t.Fatalf("stub does not decode: %v", err)
	}
	info, ok := log.Match(m.Annotations)
	if !ok {
		t.Fatalf("not a stub of this log: %+v", m)
	}
	return &m, info
}

func TestGuardPassesCleanStreamUnchanged(t *testing.T) {
	var in []byte
	in = append(in, "AMQP\x03\x01\x00\x00"...)
	in = append(in, frame(0, []byte{0x00, 0x53, 0x40, 0x45})...) // a SASL-ish body in an AMQP frame
	in = append(in, "AMQP\x00\x01\x00\x00"...)
	in = append(in, flowFrame(0)...)
	in = append(in, frame(0, nil)...) // heartbeat
	for i, m := range sampleMessages() {
		in = append(in, transferFrame(0, 1, uint32(i), false, false, marshal(t, m))...)
	}
	big := marshal(t, sampleMessages()[6])
	in = append(in, transferFrame(1, 2, 99, true, false, big[:10])...)
	in = append(in, flowFrame(0)...)
	in = append(in, transferFrame(1, 2, 99, false, false, big[10:])...)
	for _, chunk := range []int{1, 7, 4096} {
		for _, full := range []bool{false, true} {
			out, _, reasons := runGuard(t, full, in, chunk)
			if !bytes.Equal(out, in) {
				t.Fatalf("chunk %d full %v: stream changed", chunk, full)
			}
			if len(reasons) != 0 {
				t.Fatalf("chunk %d: reasons %v", chunk, reasons)
			}
		}
	}
}

func TestGuardReplacesUndecodableTransfer(t *testing.T) {
	good := marshal(t, &amqp.Message{Data: [][]byte{[]byte("good")}})
	id := "poison-1"
	poison := marshal(t, &amqp.Message{
		Header:                &amqp.MessageHeader{Durable: true, Priority: 4, DeliveryCount: 2},
		DeliveryAnnotations:   amqp.Annotations{"x-opt-lock-token": amqp.UUID{7}},
		Annotations:           amqp.Annotations{"x-opt-sequence-number": int64(42), markerKey: "forged"},
		Properties:            &amqp.MessageProperties{MessageID: id},
		ApplicationProperties: map[string]any{"d": magicUUID},
		Data:                  [][]byte{[]byte("bad")},
	})
	poison = patch(t, poison, append([]byte{0x98}, magicUUID[:]...), append([]byte{0x94}, magicUUID[:]...))
	var in []byte
	in = append(in, transferFrame(0, 0, 1, false, false, good)...)
	in = append(in, transferFrame(0, 0, 2, false, false, poison)...)
	in = append(in, transferFrame(0, 0, 3, false, false, good)...)
	for _, full := range []bool{false, true} {
		out, log, reasons := runGuard(t, full, in, 5)
		frames := readFrames(t, out)
		if len(frames) != 3 {
			t.Fatalf("%d frames", len(frames))
		}
		if !bytes.Equal(frames[0].raw, transferFrame(0, 0, 1, false, false, good)) || !bytes.Equal(frames[2].payload, good) {
			t.Fatal("good transfers changed")
		}
		if len(reasons) != 1 || !strings.Contains(reasons[0], "decimal128 not implemented") {
			t.Fatalf("reasons %v", reasons)
		}
		// same performative, new payload
		orig := transferFrame(0, 0, 2, false, false, nil)
		if !bytes.Equal(frames[1].raw[4:len(orig)], orig[4:]) {
			t.Fatal("the performative of the replaced transfer changed")
		}
		m, info := stubMessage(t, log, frames[1].payload)
		if m.Properties == nil || m.Properties.MessageID != id || m.Header == nil || m.Header.DeliveryCount != 2 {
			t.Fatalf("stub lost header/properties: %+v %+v", m.Header, m.Properties)
		}
		if m.ApplicationProperties != nil || m.Data != nil {
			t.Fatal("stub keeps the undecodable sections")
		}
		if m.Annotations["x-opt-sequence-number"] != int64(42) || m.DeliveryAnnotations["x-opt-lock-token"] != (amqp.UUID{7}) {
			t.Fatalf("stub lost the annotations: %v %v", m.Annotations, m.DeliveryAnnotations)
		}
		if info.Reason != "application-properties: decimal128 not implemented by go-amqp" || info.Size != len(poison) {
			t.Fatalf("info %+v", info)
		}
		// the original bytes, every section, intact although the read
		// buffer they came from was reused
		if !bytes.Equal(info.Raw, poison) {
			t.Fatalf("raw % x\nwant % x", info.Raw, poison)
		}
		// a stub stays a stub once its entry is taken
		if again, ok := log.Match(m.Annotations); !ok || again.Reason == info.Reason {
			t.Fatalf("second match: %v %+v", ok, again)
		}
	}
}

func TestGuardSplitDeliveries(t *testing.T) {
	poison := poisonPayload(t, "char")
	good := marshal(t, sampleMessages()[6])
	var in []byte
	// link 1 (channel 0, handle 1): poison in three frames; link 2
	// (channel 0, handle 2): good in two frames, interleaved; a flow and a
	// single-frame transfer in between.
	in = append(in, transferFrame(0, 1, 10, true, false, poison[:5])...)
	in = append(in, transferFrame(0, 2, 11, true, false, good[:7])...)
	in = append(in, flowFrame(0)...)
	in = append(in, transferFrame(0, 1, 10, true, false, poison[5:9])...)
	in = append(in, transferFrame(0, 2, 11, false, false, good[7:])...)
	in = append(in, transferFrame(0, 3, 12, false, false, good)...)
	in = append(in, transferFrame(0, 1, 10, false, false, poison[9:])...)
	in = append(in, transferFrame(0, 1, 13, false, false, good)...)
	out, log, reasons := runGuard(t, false, in, 3)
	frames := readFrames(t, out)
	if len(frames) != 8 || len(reasons) != 1 {
		t.Fatalf("%d frames, reasons %v", len(frames), reasons)
	}
	// order kept; link 2 and the others untouched
	in2 := readFrames(t, in)
	for _, i := range []int{1, 2, 4, 5, 7} {
		if !bytes.Equal(frames[i].raw, in2[i].raw) {
			t.Fatalf("frame %d changed", i)
		}
	}
	// link 1: stub in its first frame, empty payloads after it
	if len(frames[3].payload) != 0 || len(frames[6].payload) != 0 {
		t.Fatal("continuation frames keep payload")
	}
	if !frames[0].t.more || !frames[3].t.more || frames[6].t.more {
		t.Fatal("more flags changed")
	}
	_, info := stubMessage(t, log, frames[0].payload)
	if info.Reason != "application-properties: char not implemented by go-amqp" || !bytes.Equal(info.Raw, poison) {
		t.Fatalf("info %+v", info)
	}
}

// Raw is kept only when asked for, and within MaxRaw.
func TestGuardKeepRawBounds(t *testing.T) {
	poison := poisonPayload(t, "decimal32")
	in := transferFrame(0, 0, 1, false, false, poison)
	for _, tt := range []struct {
		opt  Options
		kept bool
	}{
		{Options{}, false},
		{Options{KeepRaw: true}, true},
		{Options{KeepRaw: true, MaxRaw: len(poison)}, true},
		{Options{KeepRaw: true, MaxRaw: len(poison) - 1}, false},
	} {
		out, log, _ := runGuardOpt(t, tt.opt, in, 1024)
		_, info := stubMessage(t, log, readFrames(t, out)[0].payload)
		if kept := info.Raw != nil; kept != tt.kept || info.Size != len(poison) ||
			info.Reason != "application-properties: decimal32 not implemented by go-amqp" {
			t.Errorf("%+v: kept %v, info %+v", tt.opt, kept, info)
		}
	}
}

// diagnose names the failing section; a failure no section has on its own
// keeps go-amqp's error.
func TestDiagnose(t *testing.T) {
	for typ, want := range map[string]string{
		"decimal64": "application-properties: decimal64 not implemented by go-amqp",
		"char":      "application-properties: char not implemented by go-amqp",
	} {
		p := poisonPayload(t, typ)
		if got := diagnose(p, decodeCheck(p)).Error(); got != want {
			t.Errorf("%s: %q, want %q", typ, got, want)
		}
	}
	// an amqp-value holding a decimal128
	v := []byte{0x00, 0x53, 0x77, 0x94}
	v = append(v, make([]byte, 16)...)
	if got := diagnose(v, decodeCheck(v)).Error(); got != "amqp-value: decimal128 not implemented by go-amqp" {
		t.Errorf("amqp-value: %q", got)
	}
	whole := errors.New("whole")
	if got := diagnose([]byte{0x00, 0x53, 0x99, 0x40}, whole); got != whole {
		t.Errorf("unknown section: %v", got)
	}
}

func TestGuardAbortedDelivery(t *testing.T) {
	poison := poisonPayload(t, "decimal64")
	good := marshal(t, &amqp.Message{Value: "v"})
	var in []byte
	in = append(in, transferFrame(0, 1, 1, true, false, poison[:4])...)
	in = append(in, transferFrame(0, 1, 1, false, true, nil)...) // aborted: go-amqp discards it
	in = append(in, transferFrame(0, 1, 2, false, false, good)...)
	out, _, reasons := runGuard(t, false, in, 64)
	if !bytes.Equal(out, in) || len(reasons) != 0 {
		t.Fatalf("aborted delivery: changed %v, reasons %v", !bytes.Equal(out, in), reasons)
	}
}

func TestGuardPassthroughOnGarbage(t *testing.T) {
	in := append([]byte{0, 0, 0, 3, 2, 0, 0, 0}, bytes.Repeat([]byte{0xff}, 100)...)
	out, _, _ := runGuard(t, false, in, 10)
	if !bytes.Equal(out, in) {
		t.Fatal("garbage not passed through")
	}
}

func TestPoisonLogBounded(t *testing.T) {
	log := NewLog()
	var first string
	for i := 0; i < maxPoisonEntries+10; i++ {
		m := log.add(Info{Reason: "r"})
		if i == 0 {
			first = m
		}
	}
	if len(log.m) != maxPoisonEntries {
		t.Fatalf("%d entries", len(log.m))
	}
	// an evicted entry still matches (the message is still a stub)
	info, ok := log.Match(amqp.Annotations{markerKey: first})
	if !ok || info.Reason == "" {
		t.Fatal("evicted stub not recognised")
	}
	// the payloads of unmatched entries are bounded in bytes: the oldest
	// lose theirs, the newest keeps it, a match gives the bytes back
	log = NewLog()
	raw := make([]byte, maxLogRaw/4+1)
	var markers []string
	for range 5 {
		markers = append(markers, log.add(Info{Reason: "r", Raw: raw}))
	}
	if log.raw > maxLogRaw {
		t.Fatalf("%d raw bytes held", log.raw)
	}
	if info, _ := log.Match(amqp.Annotations{markerKey: markers[0]}); info.Raw != nil {
		t.Fatal("oldest entry kept its payload")
	}
	if info, _ := log.Match(amqp.Annotations{markerKey: markers[4]}); len(info.Raw) != len(raw) {
		t.Fatal("newest entry lost its payload")
	}
	if want := 2 * len(raw); log.raw != want {
		t.Fatalf("%d raw bytes held, want %d", log.raw, want)
	}
	// another log's stub or a forged marker is a normal message
	if _, ok := NewLog().Match(amqp.Annotations{markerKey: first}); ok {
		t.Fatal("foreign marker matched")
	}
}

// FuzzGuard: arbitrary input never panics the guard, and a stream that only
// holds whole, valid frames comes out frame for frame.
func FuzzGuard(f *testing.F) {
	f.Add([]byte("AMQP\x00\x01\x00\x00"), uint8(3))
	f.Add(transferFrame(0, 1, 1, false, false, []byte{0x00, 0x53, 0x77, 0x94}), uint8(1))
	f.Add(append(transferFrame(0, 1, 1, true, false, []byte{0x00}), transferFrame(0, 1, 1, false, false, []byte{0x53, 0x77, 0x73, 1, 2, 3, 4})...), uint8(5))
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		a, b := net.Pipe()
		g := newGuard(b, false, NewLog(), nil)
		go func() {
			c := int(chunk) + 1
			for i := 0; i < len(in); i += c {
				_, _ = a.Write(in[i:min(i+c, len(in))])
			}
			a.Close()
		}()
		_, _ = io.ReadAll(g)
	})
}

// A good message costs no allocation, KeepRaw or not: only replaced
// payloads are copied.
func TestGuardGoodPathAllocFree(t *testing.T) {
	g := newGuard(nil, false, NewLog(), nil)
	g.keepRaw = true
	good := marshal(t, sampleMessages()[6])
	if n := testing.AllocsPerRun(100, func() {
		if _, ok := g.check(good); !ok {
			t.Fatal("good message replaced")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per good message", n)
	}
}
