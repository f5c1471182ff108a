package sbrest

import (
	"encoding/json"
	"errors"
	"strings"
)

// A small reader for JSON objects whose members are read one by one:
// BrokerProperties, UserProperties and batch elements. It avoids the
// reflection of encoding/json on the hot path (measured in
// docs/benchmarks.md, "JSON: hand-written or encoding/json"), keeps the
// members' order and their raw number text (UserProperties' types are
// inferred from it); the input is validated with json.Valid first, so the
// scanner can trust its shape.

var errNotObject = errors.New("not a JSON object")

// eachMember calls fn for every member of the JSON object s, in order, with
// the member's unquoted key and raw value text.
func eachMember(s string, fn func(key, raw string) error) error {
	if !json.Valid([]byte(s)) {
		// Name the problem the way encoding/json does.
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return err
		}
		return errNotObject
	}
	i := skipWS(s, 0)
	if i >= len(s) || s[i] != '{' {
		return errNotObject
	}
	i = skipWS(s, i+1)
	if s[i] == '}' {
		return nil
	}
	for {
		end := skipValue(s, i)
		key, err := unquoteJSON(s[i:end])
		if err != nil {
			return err
		}
		i = skipWS(s, end) + 1 // past ':'
		i = skipWS(s, i)
		end = skipValue(s, i)
		if err := fn(key, s[i:end]); err != nil {
			return err
		}
		i = skipWS(s, end)
		if s[i] == '}' {
			return nil
		}
		i = skipWS(s, i+1) // past ','
	}
}

func skipWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the (valid) JSON value starting at i.
func skipValue(s string, i int) int {
	switch s[i] {
	case '"':
		for i++; ; i++ {
			switch s[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch s[i] {
			case '"':
				i = skipValue(s, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(s) && strings.IndexByte(",}] \t\r\n", s[i]) < 0 {
		i++
	}
	return i
}

// unquoteJSON decodes a raw JSON string; the common case without escapes
// allocates nothing.
func unquoteJSON(raw string) (string, error) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", errors.New("want a string, got " + clip(raw))
	}
	if strings.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1], nil
	}
	var s string
	err := json.Unmarshal([]byte(raw), &s)
	return s, err
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
