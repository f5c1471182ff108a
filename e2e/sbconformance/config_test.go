package sbconformance

import ()

// The entities of the conformance run: one per scenario so that tests do
// not see each other's messages; short lock durations keep the suite fast.
func entityConfig() map[string]any {
	q := func(name string, props map[string]any) map[string]any {
		m := map[string]any{"name": name, "lockDuration": "PT5S"}
		for k, v := range props {
			m[k] = v
		}
		return m
	}
	queues := []any{
		q("basic", nil),
		q("abandon", nil),
		q("release", nil),
		q("deadletter", nil),
		q("defer", nil),
		q("renew", map[string]any{"lockDuration": "PT4S"}),
		q("lockexp", map[string]any{"lockDuration": "PT2S"}),
		q("maxdc", map[string]any{"maxDeliveryCount": 3}),
		q("sched", nil),
		q("ttl-dlq", map[string]any{"deadLetteringOnMessageExpiration": true}),
		q("ttl-drop", nil),
		q("ttl-default", map[string]any{"defaultMessageTimeToLive": "PT1S", "deadLetteringOnMessageExpiration": true}),
		q("dedup", map[string]any{"requiresDuplicateDetection": true, "duplicateDetectionHistoryTimeWindow": "PT20S"}),
		q("props", nil),
		q("peek", nil),
		q("big", map[string]any{"maxMessageSizeInKilobytes": 256}),
		q("rnd", nil),
		q("batch", nil),
		q("settle-mgmt", nil),
		q("sess", map[string]any{"requiresSession": true, "lockDuration": "PT3S"}),
		q("sess-next", map[string]any{"requiresSession": true}),
		q("sess-lock", map[string]any{"requiresSession": true, "lockDuration": "PT4S"}),
		q("sess-state", map[string]any{"requiresSession": true}),
		q("auth", map[string]any{"authorizationRules": []any{
			map[string]any{"name": "listenonly", "key": "listen-only-key", "rights": []string{"Listen"}},
		}}),
		// REST data plane
		q("rest-in", nil),
		q("rest-out", nil),
		q("rest-batch", nil),
		// management API (ATOM) runtime properties
		q("admin-counts", nil),
		// for the JavaScript SDK
		q("js-basic", nil),
		q("js-abandon", nil),
		q("js-dlq", nil),
		q("js-defer", nil),
		q("js-renew", map[string]any{"lockDuration": "PT4S"}),
		q("js-sched", nil),
		q("js-sess", map[string]any{"requiresSession": true}),
		q("js-props", nil),
	}
	topics := []any{
		map[string]any{"name": "fanout", "subscriptions": []any{
			map[string]any{"name": "a", "lockDuration": "PT5S"},
			map[string]any{"name": "b", "lockDuration": "PT5S"},
		}},
		map[string]any{"name": "admin-topic", "subscriptions": []any{
			map[string]any{"name": "s", "lockDuration": "PT5S"},
		}},
		map[string]any{"name": "js-topic", "subscriptions": []any{
			map[string]any{"name": "x"}, map[string]any{"name": "y"},
		}},
	}
	return map[string]any{
		"namespace": "sbconformance",
		"sharedAccessPolicies": []any{
			map[string]any{"name": keyName, "key": keyVal, "rights": []string{"Manage", "Send", "Listen"}},
		},
		"queues": queues,
		"topics": topics,
	}
}
