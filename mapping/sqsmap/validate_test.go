package sqsmap

import (
	"strings"
	"testing"
)

func TestCheckName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"Order_ID-2.v1", true},
		{strings.Repeat("n", 256), true},
		{strings.Repeat("n", 257), false},
		{"", false},
		{"AWS.x", false},
		{"aws.x", false},
		{"aWs.x", false},
		{"Amazon.x", false},
		{"AMAZON.x", false},
		{"AWSx", true},
		{"Amazonx", true},
		{"x.AWS.y", true},
		{".x", false},
		{"x.", false},
		{"a..b", false},
		{"a.b.c", true},
		{"a b", false},
		{"a/b", false},
		{"größe", false},
		{"qbridge.envelope", false},
	}
	for _, tc := range tests {
		r := checkName(tc.name)
		if (r == "") != tc.ok {
			t.Errorf("checkName(%q) = %q, want ok=%v", tc.name, r, tc.ok)
		}
	}
}

func TestInvalidTextAt(t *testing.T) {
	tests := []struct {
		s  string
		at int
	}{
		{"plain", -1},
		{"tab\tlf\ncr\r", -1},
		{"Grüße 🌍 \u00a0\u0085\u007f", -1},
		{"\uD7FF\uE000\uFFFD\U00010000\U0010FFFF", -1},
		{"a\x00", 1},
		{"ab\x1f", 2},
		{"\x0b", 0},
		{"ok\uFFFE", 2},
		{"\uFFFF", 0},
		{"a\xff", 1},
		{"a\xed\xa0\x80", 1}, // an encoded surrogate is not UTF-8
	}
	for _, tc := range tests {
		if got := invalidTextAt(tc.s); got != tc.at {
			t.Errorf("invalidTextAt(%q) = %d, want %d", tc.s, got, tc.at)
		}
	}
}

func TestCheckNumber(t *testing.T) {
	digits38 := strings.Repeat("9", 38)
	tests := []struct {
		s  string
		ok bool
	}{
		{"0", true},
		{"-0", true},
		{"42", true},
		{"+42", true},
		{"-3.25", true},
		{".5", true},
		{"5.", true},
		{"007", true},
		{"1.50", true},
		{"1e5", true},
		{"1E-5", true},
		{digits38, true},
		{"-" + digits38, true},
		{"0.000" + digits38, true},
		{digits38 + "000000", true}, // trailing zeros are not significant
		{"1" + strings.Repeat("0", 50) + "1", false},
		{"9" + digits38, false},
		{"1" + strings.Repeat("0", 126), true}, // 10^126
		{"1" + strings.Repeat("0", 127), false},
		{"2" + strings.Repeat("0", 126), false},
		{"1.5e126", false},
		{"1e126", true},
		{"9.99e125", true},
		{"1e-128", true},
		{"0." + strings.Repeat("0", 127) + "1", true}, // 10^-128
		{"0." + strings.Repeat("0", 128) + "1", false},
		{"1e-129", false},
		{"0e999999999", true},
		{"1e999999999", false},
		{"1e-999999999", false},
		{"NaN", false},
		{"Infinity", false},
		{"", false},
		{"-", false},
		{"1,5", false},
		{"0x10", false},
		{"1e", false},
	}
	for _, tc := range tests {
		r := checkNumber(tc.s)
		if (r == "") != tc.ok {
			t.Errorf("checkNumber(%q) = %q, want ok=%v", tc.s, r, tc.ok)
		}
	}
}

func TestCheckID(t *testing.T) {
	for _, ok := range []string{"g", "a-Z_0.9", `!"#$%&'()*+,-./:;<=>?@[\]^_{|}~` + "`", strings.Repeat("x", 128)} {
		if r := checkID(ok); r != "" {
			t.Errorf("checkID(%q) = %q, want ok", ok, r)
		}
	}
	for _, bad := range []string{"a b", "grüße", strings.Repeat("x", 129), "tab\t", "\x7f"} {
		if checkID(bad) == "" {
			t.Errorf("checkID(%q) ok, want refused", bad)
		}
	}
}

func TestCheckDataType(t *testing.T) {
	for dt, ok := range map[string]bool{
		"String":                             true,
		"Number.int":                         true,
		"Binary.png":                         true,
		"String.ünicode label":               true,
		"String." + strings.Repeat("l", 249): true,  // 256
		"String." + strings.Repeat("l", 250): false, // 257
		"String.\x01":                        false,
		"Number.\uFFFF":                      false,
	} {
		if r := checkDataType(dt); (r == "") != ok {
			t.Errorf("checkDataType(%q) = %q, want ok=%v", dt, r, ok)
		}
	}
}
