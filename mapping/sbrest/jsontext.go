package sbrest

// A hand-written JSON string writer instead of encoding/json: kept because
// it is measured to matter (docs/benchmarks.md, "JSON: hand-written or
// encoding/json"), and because an HTTP header (BrokerProperties, the
// envelope) needs non-ASCII as \u escapes, which encoding/json leaves as is.

import (
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. With ascii set, every
// non-ASCII character is written as a \u escape so the JSON can travel in an
// HTTP header (BrokerProperties, the envelope). s must be valid UTF-8.
func appendJSONString(dst []byte, s string, ascii bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			i++
			continue
		}
		if c >= 0x80 && !ascii {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
			i++
		case c == '\n':
			dst = append(dst, '\\', 'n')
			i++
		case c == '\r':
			dst = append(dst, '\\', 'r')
			i++
		case c == '\t':
			dst = append(dst, '\\', 't')
			i++
		case c < 0x80:
			dst = appendU(dst, rune(c))
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r >= 0x10000 {
				r -= 0x10000
				dst = appendU(dst, 0xd800+(r>>10))
				dst = appendU(dst, 0xdc00+(r&0x3ff))
			} else {
				dst = appendU(dst, r)
			}
			i += size
		}
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendU(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}

// asciiJSON rewrites compact JSON text (as encoding/json produces it) so
// that it is printable ASCII: non-ASCII characters and DEL, which can only
// occur inside strings, become \u escapes. The JSON value is unchanged.
func asciiJSON(s string) string {
	i := 0
	for i < len(s) && s[i] < 0x7f {
		i++
	}
	if i == len(s) {
		return s
	}
	b := make([]byte, 0, len(s)+32)
	b = append(b, s[:i]...)
	for _, r := range s[i:] {
		switch {
		case r < 0x7f:
			b = append(b, byte(r))
		case r >= 0x10000:
			r -= 0x10000
			b = appendU(b, 0xd800+(r>>10))
			b = appendU(b, 0xdc00+(r&0x3ff))
		default:
			b = appendU(b, r)
		}
	}
	return string(b)
}
