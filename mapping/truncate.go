package mapping

import "unicode/utf8"

// TruncateUTF8 returns s cut to at most n bytes at a rune boundary, so that
// a reason or description a broker limits in bytes stays valid UTF-8.
func TruncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
