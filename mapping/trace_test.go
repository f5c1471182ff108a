package mapping

import (
	"testing"
)

// Golden vectors: the X-Ray header of docs/wire-sqs.md §5 and its W3C form, derived by
// hand: the 8-hex epoch and the 24-hex unique part of Root concatenate to the
// 32-hex trace id; Parent is the parent id; Sampled=1 is flags 01.
var traceGolden = []struct {
	name        string
	xray        string
	traceparent string
}{
	{"wire-sqs.md §5 example, sampled",
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
		"00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"},
	{"not sampled",
		"Root=1-00000001-000000000000000000000002;Parent=0000000000000003;Sampled=0",
		"00-00000001000000000000000000000002-0000000000000003-00"},
	{"all f",
		"Root=1-ffffffff-ffffffffffffffffffffffff;Parent=ffffffffffffffff;Sampled=1",
		"00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01"},
}

func TestTraceGolden(t *testing.T) {
	for _, g := range traceGolden {
		t.Run(g.name, func(t *testing.T) {
			x, err := ParseXRay(g.xray)
			if err != nil {
				t.Fatal(err)
			}
			if got := x.Traceparent(); got != g.traceparent {
				t.Errorf("X-Ray -> traceparent = %q, want %q", got, g.traceparent)
			}
			w, err := ParseTraceparent(g.traceparent)
			if err != nil {
				t.Fatal(err)
			}
			if got := w.XRay(); got != g.xray {
				t.Errorf("traceparent -> X-Ray = %q, want %q", got, g.xray)
			}
			d, err := ParseDiagnosticID(g.traceparent)
			if err != nil || d != w {
				t.Errorf("Diagnostic-Id = %+v, %v; want %+v", d, err, w)
			}
			if got := x.XRay(); got != g.xray {
				t.Errorf("X-Ray round trip = %q", got)
			}
		})
	}
}

func TestXRayKeepsWhatW3CCannotSay(t *testing.T) {
	for _, h := range []string{
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=?",
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",
		"Root=1-5759e988-bd862e3fe1be46a994272793",
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a87bd80c:1|68fd508a:5",
	} {
		tr, err := ParseXRay(h)
		if err != nil {
			t.Fatalf("%s: %v", h, err)
		}
		if got := tr.XRay(); got != h {
			t.Errorf("round trip %q -> %q", h, got)
		}
	}
}

func TestParseDiagnosticIDRequestID(t *testing.T) {
	tr, err := ParseDiagnosticID("|5759e988bd862e3fe1be46a994272793.53995c3f42cd8ad8.")
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Traceparent(); got != "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-00" {
		t.Fatalf("got %q", got)
	}
}

func TestTraceErrors(t *testing.T) {
	bad := map[string]func(string) (Trace, error){
		"Root=1-5759e988-bd862e3fe1be46a99427279":            ParseXRay,
		"Root=2-5759e988-bd862e3fe1be46a994272793":           ParseXRay,
		"Root=1-5759E988-bd862e3fe1be46a994272793":           ParseXRay,
		"Parent=53995c3f42cd8ad8":                            ParseXRay,
		"Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=2": ParseXRay,
		"Root=1-00000000-000000000000000000000000":           ParseXRay,
		"Root": ParseXRay,
		"00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-1":    ParseTraceparent,
		"00-00000000000000000000000000000000-53995c3f42cd8ad8-01":   ParseTraceparent,
		"00-5759e988bd862e3fe1be46a994272793-0000000000000000-01":   ParseTraceparent,
		"ff-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01":   ParseTraceparent,
		"00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01-x": ParseTraceparent,
		"00-5759E988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01":   ParseTraceparent,
		"|5759e988bd862e3fe1be46a994272793":                         ParseDiagnosticID,
		"|00000000000000000000000000000000.53995c3f42cd8ad8.":       ParseDiagnosticID,
	}
	for h, parse := range bad {
		if tr, err := parse(h); err == nil {
			t.Errorf("%q parsed as %+v, want error", h, tr)
		}
	}
	// Future versions: extra fields are ignored.
	if _, err := ParseTraceparent("01-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01-extra"); err != nil {
		t.Errorf("future version: %v", err)
	}
}

func FuzzTraceHeaders(f *testing.F) {
	for _, g := range traceGolden {
		f.Add(g.xray)
		f.Add(g.traceparent)
	}
	f.Add("|5759e988bd862e3fe1be46a994272793.53995c3f42cd8ad8.")
	f.Fuzz(func(t *testing.T, h string) {
		if tr, err := ParseXRay(h); err == nil {
			again, err := ParseXRay(tr.XRay())
			if err != nil || again != tr {
				t.Fatalf("X-Ray %q unstable: %+v vs %+v (%v)", h, tr, again, err)
			}
		}
		if tr, err := ParseTraceparent(h); err == nil {
			again, err := ParseTraceparent(tr.Traceparent())
			if err != nil || again != tr {
				t.Fatalf("traceparent %q unstable", h)
			}
		}
		_, _ = ParseDiagnosticID(h)
	})
}
