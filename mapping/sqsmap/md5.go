package sqsmap

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// MD5OfBody is the SQS MD5OfBody: the lowercase hex MD5 of the body's UTF-8.
func MD5OfBody(body string) string {
	sum := md5.Sum([]byte(body))
	return hex.EncodeToString(sum[:])
}

// MD5OfAttributes is the SQS MD5OfMessageAttributes (docs/wire-sqs.md §2): attributes
// sorted by name; for each, the name, the data type (custom label included)
// and the value, each as a 4-byte big-endian length and the bytes, with a
// transport byte (1 String/Number, 2 Binary) before the value; MD5 of it all.
// An empty map hashes the empty buffer (SQS then sends no digest at all).
func MD5OfAttributes(attrs map[string]types.MessageAttributeValue) string {
	sum := md5Attrs(attrs)
	return hex.EncodeToString(sum[:])
}

func md5Attrs(attrs map[string]types.MessageAttributeValue) [md5.Size]byte {
	var stack [16]string
	names := stack[:0]
	for name := range attrs {
		names = append(names, name)
	}
	slices.Sort(names)
	// The buffer of ten typical attributes fits on the stack.
	var buf [1024]byte
	b := buf[:0]
	for _, name := range names {
		a := attrs[name]
		dt := deref(a.DataType)
		b = appendLenBytes(b, name)
		b = appendLenBytes(b, dt)
		if base, _, _ := strings.Cut(dt, "."); base == "Binary" {
			b = append(b, 2)
			b = binary.BigEndian.AppendUint32(b, uint32(len(a.BinaryValue)))
			b = append(b, a.BinaryValue...)
		} else {
			b = append(b, 1)
			b = appendLenBytes(b, deref(a.StringValue))
		}
	}
	return md5.Sum(b)
}

func appendLenBytes(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// digestIs reports whether the hex digest h (any case) is sum.
func digestIs(h string, sum [md5.Size]byte) bool {
	var d [md5.Size]byte
	if len(h) != 2*md5.Size {
		return false
	}
	_, err := hex.Decode(d[:], []byte(h))
	return err == nil && d == sum
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
