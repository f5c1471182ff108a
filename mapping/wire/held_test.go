package wire

import (
	"bytes"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
)

// What a policy leaves out of a message is reported only for a message the
// encoder then produces: one refused as too large after its attributes
// were dropped or moved must not be counted and logged as sent without
// them (an audit saw the drop counter rise for dead-lettered messages).
func TestNoReportsForARefusedMessage(t *testing.T) {
	bad := mapping.Attribute{Name: "a b", Value: mapping.String("\x00")} // fits no form as it is
	checked := 0
	for _, f := range All() {
		for _, p := range []mapping.Policy{mapping.Drop, mapping.Encode} {
			var reports []string
			opt := mapping.Options{Policy: p, MaxMessageSize: 2048, OnDrop: func(field, reason string) { reports = append(reports, field+": "+reason) }}
			// and a TTL over AMQP's 49.7 days, a PartitionKey Service Bus
			// refuses beside another SessionId
			small := &mapping.Message{ID: "m", Body: []byte("b"), Attributes: []mapping.Attribute{bad},
				TTL: 60 * 24 * time.Hour, GroupKey: "g", PartitionKey: "p"}
			if _, err := f.Render(small, opt); err != nil {
				continue // this form's policy refuses it anyway
			}
			if len(reports) == 0 {
				continue // nothing for the policy to do on this form
			}
			reports = nil
			big := small.Clone()
			big.Body = bytes.Repeat([]byte{'x'}, 4096)
			if _, err := f.Render(big, opt); !mapping.IsReject(err) {
				t.Fatalf("%s %s: a message over the limit: %v", f.Name, p, err)
			}
			if len(reports) > 0 {
				t.Errorf("%s %s: reported for a refused message: %q", f.Name, p, reports)
			}
			checked++
		}
	}
	if checked != 2*len(All()) {
		t.Errorf("checked %d form and policy pairs of %d: a form's policy had nothing to do", checked, 2*len(All()))
	}
}
