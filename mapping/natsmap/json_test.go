package natsmap

import (
	"bytes"
	"testing"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/mappingtest"
)

func TestRenderJSONGolden(t *testing.T) {
	m := &mapping.Message{
		Body: []byte("<hello>"), To: "orders.new", GroupKey: "acme",
		Attributes: []mapping.Attribute{
			{Name: "tags", Value: mapping.Strings("a", "b")},
			{Name: "qty", Value: mapping.Int32(3)},
		},
	}
	out, err := RenderJSON(m, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"subject":"orders.new","headers":{"Qbridge-Group":["acme"],"qbridge.envelope":["{\"v\":1,\"types\":{\"qty\":\"Number.int\"},\"m\":{\"to\":\"orders.new\"}}"],"qty":["3"],"tags":["a","b"]},"data":"<hello>"}`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	back, err := ParseJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	want2 := m.Clone()
	sortAttributes(want2.Attributes)
	if back.Source.Address != "orders.new" {
		t.Fatalf("address %q", back.Source.Address)
	}
	if d := mappingtest.Diff(want2, clearSource(back), mappingtest.WithSource()); len(d) > 0 {
		t.Fatal(d)
	}
}

func TestJSONBinaryData(t *testing.T) {
	m := &mapping.Message{Body: []byte{0xff, 0xfe}}
	out, err := RenderJSON(m, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"subject":"","data":"//4=","dataEncoding":"base64"}`; string(out) != want {
		t.Fatalf("got %s want %s", out, want)
	}
	back, err := ParseJSON(out)
	if err != nil || !bytes.Equal(back.Body, m.Body) {
		t.Fatalf("%v %v", back, err)
	}
	// The full message, every kind.
	full := fullMessage()
	out, err = RenderJSON(full, mapping.Options{})
	if err != nil {
		t.Fatal(err)
	}
	back, err = ParseJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	want := full.Clone()
	sortAttributes(want.Attributes)
	if d := mappingtest.Diff(want, clearSource(back), mappingtest.WithSource()); len(d) > 0 {
		t.Fatal(d)
	}
	again, err := RenderJSON(back, mapping.Options{})
	if err != nil || !bytes.Equal(again, out) {
		t.Fatalf("not stable:\n%s\n%s", out, again)
	}
}

func TestParseJSONRejects(t *testing.T) {
	for _, in := range []string{
		`[]`, `{"subject":"s","extra":1}`, `{"subject":"s","data":"x","dataEncoding":"hex"}`,
		`{"subject":"s","data":"!","dataEncoding":"base64"}`, `{"subject":"s","headers":{"a":"x"}}`,
		`{"subject":"s"} {}`, `{"subject":"s","headers":{"qbridge.envelope":["{"]}}`,
	} {
		if _, err := ParseJSON([]byte(in)); !mapping.IsReject(err) {
			t.Errorf("%s: %v", in, err)
		}
	}
}
