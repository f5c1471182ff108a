package servicebus

import (
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/sbrest"
)

// A received message whose carry envelope cannot be read is dead-lettered
// with its application properties and the envelope's text as
// mapping.RefusedEnvelopeAttr; they were left out (body and ids only).
// Without an envelope to blame, only what can be trusted is kept.
func TestUndecodableKeepsProperties(t *testing.T) {
	id := "m-1"
	received := func(props map[string]any) *azservicebus.ReceivedMessage {
		return &azservicebus.ReceivedMessage{MessageID: id, Body: []byte("b"), RawAMQPMessage: &azservicebus.AMQPAnnotatedMessage{
			ApplicationProperties: props,
			Body:                  azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("b")}},
			Properties:            &azservicebus.AMQPAnnotatedMessageProperties{MessageID: id},
		}}
	}
	m, err := decodeReceived(received(map[string]any{"tenant": "t", "qty": int32(3), mapping.EnvelopeName: "oops"}), "q")
	if err == nil || !mapping.IsReject(err) {
		t.Fatalf("decode error %v, want a reject", err)
	}
	if v, ok := m.Attr("tenant"); !ok || v.Str() != "t" {
		t.Errorf("tenant = %v %v", v, ok)
	}
	if v, ok := m.Attr("qty"); !ok || v.Kind != mapping.KindInt32 {
		t.Errorf("qty = %v %v, want the int", v, ok)
	}
	if v, ok := m.Attr(mapping.RefusedEnvelopeAttr); !ok || v.Str() != "oops" {
		t.Errorf("%s = %v %v, want the refused text", mapping.RefusedEnvelopeAttr, v, ok)
	}
	if m.ID != id || string(m.Body) != "b" || m.Source.Address != "q" {
		t.Errorf("id %q body %q address %q", m.ID, m.Body, m.Source.Address)
	}
	_, err = decodeReceived(&azservicebus.ReceivedMessage{MessageID: id, Body: []byte("b")}, "q")
	if err == nil {
		t.Error("a message without its AMQP form: no error")
	}
}

// The same over the REST API: the custom properties are kept.
func TestUndecodableRESTKeepsProperties(t *testing.T) {
	h := http.Header{}
	h.Set("BrokerProperties", `{"MessageId":"m-1","DeliveryCount":1,"SequenceNumber":7}`)
	h.Set("tenant", `"t"`)
	h.Set(mapping.EnvelopeName, `"oops"`)
	if _, err := sbrest.Decode(h, []byte("b")); err == nil {
		t.Fatal("the corrupt envelope decoded")
	}
	m := restWithoutEnvelope(h, []byte("b"))
	if m == nil {
		t.Fatal("nothing decoded without the envelope")
	}
	if v, ok := m.Attr("Tenant"); !ok || v.Str() != "t" { // HTTP spells the names so
		t.Errorf("Tenant = %v %v", v, ok)
	}
	if v, ok := m.Attr(mapping.RefusedEnvelopeAttr); !ok || v.Str() != "oops" {
		t.Errorf("%s = %v %v, want the refused text, as the other transports give it", mapping.RefusedEnvelopeAttr, v, ok)
	}
	if m.ID != "m-1" {
		t.Errorf("id %q", m.ID)
	}
	h.Del(mapping.EnvelopeName)
	if restWithoutEnvelope(h, []byte("b")) != nil {
		t.Error("no envelope to leave out: want nil")
	}
}
