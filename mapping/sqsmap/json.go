package sqsmap

import (
	"bytes"
	"crypto/md5"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/qbridge/qbridge/mapping"
)

// jsonMessage is the AWS JSON shape of a received message (the order of the
// fields is the order `aws sqs receive-message` prints).
type jsonMessage struct {
	MessageId              *string              `json:"MessageId,omitempty"`
	ReceiptHandle          *string              `json:"ReceiptHandle,omitempty"`
	MD5OfBody              *string              `json:"MD5OfBody,omitempty"`
	Body                   *string              `json:"Body,omitempty"`
	Attributes             map[string]string    `json:"Attributes,omitempty"`
	MD5OfMessageAttributes *string              `json:"MD5OfMessageAttributes,omitempty"`
	MessageAttributes      map[string]jsonValue `json:"MessageAttributes,omitempty"`
}

type jsonValue struct {
	StringValue      *string  `json:"StringValue,omitempty"`
	BinaryValue      []byte   `json:"BinaryValue,omitempty"` // base64, as the AWS JSON protocol
	StringListValues []string `json:"StringListValues,omitempty"`
	BinaryListValues [][]byte `json:"BinaryListValues,omitempty"`
	DataType         *string  `json:"DataType,omitempty"`
}

var (
	messageFields = []string{"MessageId", "ReceiptHandle", "MD5OfBody", "Body", "Attributes",
		"MD5OfMessageAttributes", "MessageAttributes"}
	valueFields = []string{"StringValue", "BinaryValue", "StringListValues", "BinaryListValues", "DataType"}
)

// ParseJSON reads the AWS JSON shape of one received message (see the
// package doc) and decodes it with Decode.
func ParseJSON(data []byte) (*mapping.Message, error) {
	return ParseJSONWith(data, DecodeOptions{})
}

// ParseJSONWith is ParseJSON with decode options.
func ParseJSONWith(data []byte, opt DecodeOptions) (*mapping.Message, error) {
	var j jsonMessage
	if err := strictUnmarshal(data, "message", messageFields, &j); err != nil {
		return nil, err
	}
	msg := types.Message{
		MessageId:              j.MessageId,
		ReceiptHandle:          j.ReceiptHandle,
		MD5OfBody:              j.MD5OfBody,
		Body:                   j.Body,
		Attributes:             j.Attributes,
		MD5OfMessageAttributes: j.MD5OfMessageAttributes,
	}
	if len(j.MessageAttributes) > 0 {
		msg.MessageAttributes = make(map[string]types.MessageAttributeValue, len(j.MessageAttributes))
	}
	for name, v := range j.MessageAttributes {
		msg.MessageAttributes[name] = types.MessageAttributeValue{
			DataType: v.DataType, StringValue: v.StringValue, BinaryValue: v.BinaryValue,
			StringListValues: v.StringListValues, BinaryListValues: v.BinaryListValues,
		}
	}
	return Decode(msg, opt)
}

// strictUnmarshal decodes one JSON object into v, refusing field names that
// are not exactly in known (encoding/json alone matches them in any case),
// and checks the message attribute objects the same way.
func strictUnmarshal(data []byte, what string, known []string, v any) error {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return mapping.Rejectf(Wire, "json", "%s: %v", what, err)
	}
	if dec.More() {
		return mapping.Rejectf(Wire, "json", "%s: data after the JSON object", what)
	}
	if raw == nil {
		return mapping.Rejectf(Wire, "json", "%s: want a JSON object", what)
	}
	for k := range raw {
		if !contains(known, k) {
			return mapping.Rejectf(Wire, "json", "%s: unknown field %q", what, k)
		}
	}
	if ma, ok := raw["MessageAttributes"]; ok && what == "message" {
		var attrs map[string]json.RawMessage
		if err := json.Unmarshal(ma, &attrs); err != nil {
			return mapping.Rejectf(Wire, "json", "MessageAttributes: %v", err)
		}
		for name, a := range attrs {
			if err := strictUnmarshal(a, "MessageAttributes["+strconv.Quote(name)+"]", valueFields, new(jsonValue)); err != nil {
				return err
			}
		}
	}
	if err := json.Unmarshal(data, v); err != nil {
		return mapping.Rejectf(Wire, "json", "%s: %v", what, err)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// RenderJSON encodes m (for a FIFO queue when it has a group key) and
// renders what a receiver gets: Deliver's message, sent now, with a
// MessageId derived from the content and no ReceiptHandle.
func RenderJSON(m *mapping.Message, opt mapping.Options) ([]byte, error) {
	o, err := Encode(m, EncodeOptions{Options: opt, FIFO: m != nil && m.GroupKey != ""})
	if err != nil {
		return nil, err
	}
	msg := Deliver(o, contentID(o), "", time.Now())
	j := jsonMessage{
		MessageId:              msg.MessageId,
		MD5OfBody:              msg.MD5OfBody,
		Body:                   msg.Body,
		Attributes:             msg.Attributes,
		MD5OfMessageAttributes: msg.MD5OfMessageAttributes,
	}
	if len(msg.MessageAttributes) > 0 {
		j.MessageAttributes = make(map[string]jsonValue, len(msg.MessageAttributes))
		for name, a := range msg.MessageAttributes {
			j.MessageAttributes[name] = jsonValue{DataType: a.DataType, StringValue: a.StringValue, BinaryValue: a.BinaryValue}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(j); err != nil {
		return nil, fmt.Errorf("sqs: render json: %w", err)
	}
	return buf.Bytes(), nil
}

// contentID is a name-based (version 3) UUID of the send's content, so a
// rendering is reproducible.
func contentID(o *Outbound) string {
	h := md5.New()
	for _, s := range []string{MD5OfBody(o.Body), MD5OfAttributes(o.Attributes), o.GroupID, o.DedupID} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var u [16]byte
	h.Sum(u[:0])
	u[6] = u[6]&0x0f | 0x30
	u[8] = u[8]&0x3f | 0x80
	return mapping.UUIDString(u)
}
