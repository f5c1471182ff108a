package sqsmap

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// mdAttr is one attribute of a golden vector, in sorted order.
type mdAttr struct {
	name, dt string
	str      string // String/Number value
	bin      []byte // Binary value
}

// layout builds the byte layout of docs/wire-sqs.md §2 by hand,
// independently of MD5OfAttributes: 4-byte big-endian length + UTF-8 name, length + data type,
// transport byte (1 String/Number, 2 Binary), length + value.
func layout(attrs []mdAttr) []byte {
	var b []byte
	lenBytes := func(p []byte) {
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(p)))
		b = append(b, l[:]...)
		b = append(b, p...)
	}
	for _, a := range attrs {
		lenBytes([]byte(a.name))
		lenBytes([]byte(a.dt))
		if a.bin != nil {
			b = append(b, 2)
			lenBytes(a.bin)
		} else {
			b = append(b, 1)
			lenBytes([]byte(a.str))
		}
	}
	return b
}

func toMap(attrs []mdAttr) map[string]types.MessageAttributeValue {
	m := map[string]types.MessageAttributeValue{}
	for _, a := range attrs {
		v := types.MessageAttributeValue{DataType: new(a.dt)}
		if a.bin != nil {
			v.BinaryValue = a.bin
		} else {
			v.StringValue = new(a.str)
		}
		m[a.name] = v
	}
	return m
}

// The expected buffers and digests were derived independently with python3:
//
//	import hashlib, struct
//	lb = lambda b: struct.pack('>I', len(b)) + b
//	def digest(attrs):  # {name: (data type, str or bytes)}
//	    buf = b''
//	    for n in sorted(attrs, key=lambda n: n.encode()):
//	        dt, v = attrs[n]
//	        buf += lb(n.encode()) + lb(dt.encode())
//	        buf += b'\x02' + lb(v) if dt.split('.')[0] == 'Binary' else b'\x01' + lb(v.encode())
//	    return hashlib.md5(buf).hexdigest(), buf.hex()
//
// The "real SQS" vector is a response of Amazon SQS quoted in
// aws/aws-sdk-ruby#1885 (SendMessage with {"baz": String "qux"}).
func TestMD5OfAttributesGolden(t *testing.T) {
	tests := []struct {
		name   string
		attrs  []mdAttr // in sorted order
		buffer string   // hex of the layout; "" to skip
		want   string
	}{
		{
			name:  "real SQS",
			attrs: []mdAttr{{name: "baz", dt: "String", str: "qux"}},
			want:  "16bd0283a5b4962721ccd3efe4bc6257",
		},
		{
			name: "number, UTF-8 string, Binary.png",
			attrs: []mdAttr{
				{name: "amount", dt: "Number.int", str: "42"},
				{name: "city", dt: "String", str: "Zürich 東京"},
				{name: "img", dt: "Binary.png", bin: []byte{0x89, 'P', 'N', 'G', 0x00, 0xff}},
			},
			buffer: "00000006616d6f756e740000000a4e756d6265722e696e7401000000023432" +
				"000000046369747900000006537472696e67010000000e5ac3bc7269636820e69db1e4baac" +
				"00000003696d670000000a42696e6172792e706e67020000000689504e4700ff",
			want: "b4624c8a12dc0131b80374d6c9c5dcff",
		},
		{
			name: "UTF-8 name and label, byte order sort",
			attrs: []mdAttr{
				{name: "Zeta", dt: "Number", str: "-0.5"},
				{name: "a", dt: "Binary", bin: []byte{0}},
				{name: "größe", dt: "String.ünits", str: "1,5 m²"},
			},
			buffer: "000000045a657461000000064e756d62657201000000042d302e35" +
				"00000001610000000642696e6172790200000001" + "00" +
				"000000076772c3b6c39f650000000d537472696e672ec3bc6e6974730100000007312c35206dc2b2",
			want: "fee9bee1f2951dade2a2bb57e5d8482b",
		},
		{name: "none", want: "d41d8cd98f00b204e9800998ecf8427e"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			buf := layout(tc.attrs)
			if tc.buffer != "" && hex.EncodeToString(buf) != tc.buffer {
				t.Fatalf("layout\n got %x\nwant %s", buf, tc.buffer)
			}
			sum := md5.Sum(buf)
			if got := hex.EncodeToString(sum[:]); got != tc.want {
				t.Fatalf("md5 of layout = %s, want %s", got, tc.want)
			}
			if got := MD5OfAttributes(toMap(tc.attrs)); got != tc.want {
				t.Errorf("MD5OfAttributes = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestMD5OfBody(t *testing.T) {
	for body, want := range map[string]string{
		`{"foo":20}`:  "d6cf0f93237ada70daf9b6e75cfff2e6", // real SQS, aws/aws-sdk-ruby#1885
		"Grüße, 世界 🌍": "c247ec241a6d2f5c2a3630dc26bea556", // hashlib.md5(s.encode()).hexdigest()
		"":            "d41d8cd98f00b204e9800998ecf8427e",
	} {
		if got := MD5OfBody(body); got != want {
			t.Errorf("MD5OfBody(%q) = %s, want %s", body, got, want)
		}
	}
}
