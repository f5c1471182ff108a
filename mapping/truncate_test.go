package mapping

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncateUTF8(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 10, "abc"},
		{"abc", 3, "abc"},
		{"abc", 2, "ab"},
		{"abc", 0, ""},
		{"abc", -1, ""},
		{"", 0, ""},
		{"ab€cd", 4, "ab"}, // € is 3 bytes: not cut inside it
		{"ab€cd", 5, "ab€"},
		{strings.Repeat("é", 10), 5, "éé"},
		{"\xff\xfe", 1, "\xff"}, // invalid bytes are each a rune start
	} {
		got := TruncateUTF8(tc.s, tc.n)
		if got != tc.want {
			t.Errorf("TruncateUTF8(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
		if utf8.ValidString(tc.s) && !utf8.ValidString(got) {
			t.Errorf("TruncateUTF8(%q, %d) = %q: not valid UTF-8", tc.s, tc.n, got)
		}
	}
}
