package sqsmap

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/qbridge/qbridge/mapping"
)

// Limits of SQS (docs/wire-sqs.md §1, §3).
const (
	// Wire is the wire form name in RejectErrors.
	Wire = "sqs"
	// DefaultMaxMessageSize is the classic SQS limit. SQS raised it to 1 MiB
	// (1,048,576) in 2025; set mapping.Options.MaxMessageSize to use it.
	DefaultMaxMessageSize = 262144
	// MaxAttributes is the number of message attributes SQS accepts,
	// qbridge.envelope included.
	MaxAttributes   = 10
	MaxNameLen      = 256
	MaxDataTypeLen  = 256
	MaxIDLen        = 128 // MessageGroupId, MessageDeduplicationId
	MaxDelaySeconds = 900
	// DefaultGroupID is the MessageGroupId of a FIFO send whose message has no
	// group key, when EncodeOptions.DefaultGroup is empty.
	DefaultGroupID = "default"
)

// nameChars are the characters SQS allows in an attribute name.
var nameChars = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	t['_'], t['-'], t['.'] = true, true, true
	return t
}()

// invalidTextAt returns the byte offset of the first character SQS refuses in
// a body or String value (invalid UTF-8, or not an XML 1.0 Char: #x9 #xA #xD
// #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF), or -1 when all are valid.
func invalidTextAt(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
				return i
			}
			i++
			continue
		}
		// Go decodes surrogates as RuneError, so only FFFE/FFFF remain.
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || r == 0xFFFE || r == 0xFFFF {
			return i
		}
		i += n
	}
	return -1
}

func describeInvalidText(s string, at int) string {
	r, n := utf8.DecodeRuneInString(s[at:])
	if r == utf8.RuneError && n <= 1 {
		return "invalid UTF-8 at byte " + strconv.Itoa(at)
	}
	return "character " + strconv.QuoteRuneToASCII(r) + " at byte " + strconv.Itoa(at) + " is not a valid XML character"
}

// checkName returns why SQS refuses name as a message attribute name, or "".
func checkName(name string) string {
	switch {
	case name == "":
		return "empty attribute name"
	case len(name) > MaxNameLen:
		return "name of " + strconv.Itoa(len(name)) + " bytes exceeds " + strconv.Itoa(MaxNameLen)
	case name == mapping.EnvelopeName:
		return "name is reserved for the qbridge carry envelope"
	case hasPrefixFold(name, "AWS.") || hasPrefixFold(name, "Amazon."):
		return "names starting with AWS. or Amazon. (any case) are reserved"
	case name[0] == '.' || name[len(name)-1] == '.':
		return "name must not start or end with '.'"
	case strings.Contains(name, ".."):
		return "name must not contain '..'"
	}
	for i := 0; i < len(name); i++ {
		if !nameChars[name[i]] {
			r, _ := utf8.DecodeRuneInString(name[i:])
			return "character " + strconv.QuoteRuneToASCII(r) + " at byte " + strconv.Itoa(i) +
				" is not allowed in a name (A-Z a-z 0-9 _ - .)"
		}
	}
	return ""
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// checkDataType returns why SQS refuses dt (a mapping DataType, so its base is
// valid), or "".
func checkDataType(dt string) string {
	if len(dt) > MaxDataTypeLen {
		return "data type of " + strconv.Itoa(len(dt)) + " bytes exceeds " + strconv.Itoa(MaxDataTypeLen)
	}
	if at := invalidTextAt(dt); at >= 0 {
		return "data type " + strconv.QuoteToASCII(dt) + ": " + describeInvalidText(dt, at)
	}
	return ""
}

// checkNumber returns why SQS refuses s as a Number value, or "": it must be
// decimal text with at most 38 significant digits, zero or of magnitude
// 10^-128 to 10^126.
func checkNumber(s string) string {
	if !mapping.IsDecimalText(s) {
		return "Number value " + strconv.QuoteToASCII(s) + " is not decimal text"
	}
	i := 0
	if s[0] == '+' || s[0] == '-' {
		i++
	}
	// mag is the decimal exponent of the first significant digit.
	first, last, pos, mag := -1, -1, 0, 0
	var lead byte // the first significant digit
	intDigits := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		intDigits++
	}
	i = 0
	if s[0] == '+' || s[0] == '-' {
		i++
	}
	for ; i < len(s) && s[i] != 'e' && s[i] != 'E'; i++ {
		c := s[i]
		if c == '.' {
			continue
		}
		if c != '0' {
			if first < 0 {
				first, lead = pos, c
				mag = intDigits - 1 - pos
			}
			last = pos
		}
		pos++
	}
	if first < 0 {
		return "" // zero
	}
	if sig := last - first + 1; sig > 38 {
		return "Number value has " + strconv.Itoa(sig) + " significant digits; SQS allows 38"
	}
	if i < len(s) {
		exp := s[i+1:]
		neg := exp[0] == '-'
		exp = strings.TrimLeft(strings.TrimLeft(exp, "+-"), "0")
		if len(exp) > 6 {
			return "Number value is outside 10^-128 .. 10^126"
		}
		e, _ := strconv.Atoi("0" + exp)
		if neg {
			e = -e
		}
		mag += e
	}
	if mag < -128 || mag > 126 || mag == 126 && (last != first || lead != '1') {
		return "Number value is outside 10^-128 .. 10^126"
	}
	return ""
}

// checkID returns why SQS refuses s as a MessageGroupId or
// MessageDeduplicationId (1-128 of a-z A-Z 0-9 and ASCII punctuation), or "".
func checkID(s string) string {
	if len(s) > MaxIDLen {
		return "length " + strconv.Itoa(len(s)) + " exceeds " + strconv.Itoa(MaxIDLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			r, _ := utf8.DecodeRuneInString(s[i:])
			return "character " + strconv.QuoteRuneToASCII(r) + " at byte " + strconv.Itoa(i) +
				" is not allowed (a-z A-Z 0-9 and ASCII punctuation)"
		}
	}
	return ""
}

func quoteField(kind, name string) string { return kind + " " + strconv.QuoteToASCII(name) }

func attrField(name string) string { return quoteField("attribute", name) }
