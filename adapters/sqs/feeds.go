package sqs

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// SinkFeedsSource reports whether sink provably sends into the queue src
// receives from, so that a pipeline (or its dead-letter sink) would pass
// each message around forever; why says so, naming the queue. It answers
// true only when certain: the same region, endpoint and (for the region a
// profile may supply) profile as written, and the same queue_url, or the
// same queue_name and account_id (with the same credentials when the
// account is the caller's). A queue_url on one side and a queue_name on
// the other, or a URL it cannot normalize, counts as "different".
func SinkFeedsSource(src SourceConfig, sink SinkConfig) (why string, loops bool) {
	if src.Validate() != nil || sink.Validate() != nil {
		return "", false
	}
	a, b := src.ConnConfig, sink.ConnConfig
	if a.Region != b.Region || a.Profile != b.Profile {
		return "", false
	}
	ea, okA := normalizeHTTPURL(a.Endpoint)
	eb, okB := normalizeHTTPURL(b.Endpoint)
	if !okA || !okB || ea != eb {
		return "", false
	}
	switch {
	case a.QueueURL != "" && b.QueueURL != "":
		ua, okA := normalizeHTTPURL(a.QueueURL)
		ub, okB := normalizeHTTPURL(b.QueueURL)
		if !okA || !okB || ua != ub {
			return "", false
		}
		if a.QueueURL != b.QueueURL {
			return fmt.Sprintf("sends to queue %s, the queue the source receives from as %s", b.QueueURL, a.QueueURL), true
		}
		return fmt.Sprintf("sends to queue %s, the queue the source receives from", a.QueueURL), true
	case a.QueueName != "" && b.QueueName != "":
		if a.QueueName != b.QueueName || a.AccountID != b.AccountID {
			return "", false
		}
		// Without account_id the name is looked up in the account of the
		// credentials: they must be the same ones.
		if a.AccountID == "" && (a.AccessKeyID != b.AccessKeyID || a.RoleARN != b.RoleARN) {
			return "", false
		}
		where := "region " + a.Region
		if a.Region == "" {
			where = "the default region"
		}
		if a.Endpoint != "" {
			where += ", endpoint " + ea
		}
		if a.AccountID != "" {
			where += ", account " + a.AccountID
		}
		return fmt.Sprintf("sends to queue %q (%s), the queue the source receives from", a.QueueName, where), true
	}
	return "", false
}

// normalizeHTTPURL lower-cases an http(s) URL's scheme and host and makes
// its port explicit; the path (but a lone "/") and query stay as written. "" is "" (no
// endpoint override). ok is false for anything else.
func normalizeHTTPURL(raw string) (string, bool) {
	if raw == "" {
		return "", true
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return "", false
	}
	port := u.Port()
	switch {
	case port != "":
	case u.Scheme == "https":
		port = "443"
	case u.Scheme == "http":
		port = "80"
	default:
		return "", false
	}
	path := u.EscapedPath()
	if path == "/" {
		path = "" // the root: an endpoint written with or without it
	}
	s := u.Scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port) + path
	if u.RawQuery != "" {
		s += "?" + u.RawQuery
	}
	return s, true
}
