package adaptercfg

import "testing"

func TestEntityLimit(t *testing.T) {
	for _, tc := range []struct {
		name                                     string
		configured, resolved, entity, most, want int
	}{
		{"the entity's, unset", 0, 262144, 1024, 1 << 20, 1024},
		{"the entity's, within the protocol", 0, 262144, 100 << 20, 1 << 20, 1 << 20},
		{"the smaller of the two", 4096, 4096, 2048, 1 << 20, 2048},
		{"configured below the entity's", 2048, 2048, 1 << 20, 1 << 20, 2048},
		{"the entity does not say", 0, 262144, 0, 1 << 20, 262144},
	} {
		if got := EntityLimit(tc.configured, tc.resolved, tc.entity, tc.most); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
