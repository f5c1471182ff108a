package config

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// validate without -strict: an unset variable hides only the checks that
// need its value. A mistake elsewhere in the same block is still found
// (it was not: the block was skipped whole), and a block whose only
// unknowns are its secrets passes.
func TestLenientChecksTheRestOfABlock(t *testing.T) {
	t.Setenv("QB_LENIENT_UNSET", "")
	for _, tc := range []struct {
		name, block, want string
	}{
		{"nats url unset, subject wrong", `source "nats" {
    url     = env("QB_LENIENT_NOT_SET")
    subject = "bad subject"
  }`, "white space"},
		{"nats url unset, duration wrong", `source "nats" {
    url     = env("QB_LENIENT_NOT_SET")
    subject = "in"
    jetstream {
      stream   = "S"
      durable  = "d"
      ack_wait = "banana"
    }
  }`, "banana"},
		{"sqs queue url unset, wait wrong", `source "sqs" {
    region    = "us-east-1"
    queue_url = env("QB_LENIENT_NOT_SET")
    wait_time = "banana"
  }`, "banana"},
		{"nats password unset, the rest right", `source "nats" {
    url      = "nats://127.0.0.1:4222"
    user     = "u"
    password = env("QB_LENIENT_NOT_SET")
    subject  = "in"
  }`, ""},
		{"amqp url unset, address missing", `source "amqp" {
    url = env("QB_LENIENT_NOT_SET")
  }`, "address"},
		{"servicebus connection string unset, transport wrong", `source "servicebus" {
    connection_string = env("QB_LENIENT_NOT_SET")
    queue             = "q"
    transport         = "carrier-pigeon"
  }`, "carrier-pigeon"},
		{"nats url unset, the rest right", `source "nats" {
    url     = env("QB_LENIENT_NOT_SET")
    subject = "in"
  }`, ""},
		{"sqs queue url unset, the rest right", `source "sqs" {
    region    = "us-east-1"
    queue_url = env("QB_LENIENT_NOT_SET")
  }`, ""},
		{"servicebus connection string unset, the rest right", `source "servicebus" {
    connection_string = env("QB_LENIENT_NOT_SET")
    queue             = "q"
  }`, ""},
		// Not strings: left out, and no check that their value may decide
		// is reported (these were refused, though right).
		{"embedded port unset", `source "nats" {
    embedded  = true
    store_dir = "/tmp/qb-lenient"
    port      = env("QB_LENIENT_NOT_SET")
    subject   = "in"
  }`, ""},
		{"max_deliver unset", `source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "in"
    jetstream {
      stream      = "S"
      durable     = "d"
      max_deliver = env("QB_LENIENT_NOT_SET")
    }
  }`, ""},
		// A number or bool stood in for: the rest is still checked.
		{"embedded port unset, subject wrong", `source "nats" {
    embedded  = true
    store_dir = "/tmp/qb-lenient"
    port      = env("QB_LENIENT_NOT_SET")
    subject   = "in a"
  }`, "white space"},
		{"embedded from a comparison, subject wrong", `source "nats" {
    embedded  = env("QB_LENIENT_NOT_SET") == "1"
    store_dir = "/tmp/qb-lenient"
    subject   = "in a"
  }`, "white space"}, // wrong both ways (embedded false: store_dir), so wrong
		{"embedded from a comparison", `source "nats" {
    embedded  = env("QB_LENIENT_NOT_SET") == "1"
    store_dir = "/tmp/qb-lenient"
    subject   = "in"
  }`, ""},
		// Right once the variable is set (a review found each refused):
		// the error must hold every way the value may be.
		{"embedded from env, url set", `source "nats" {
    embedded = env("QB_LENIENT_NOT_SET")
    url      = "nats://127.0.0.1:4222"
    subject  = "in"
  }`, ""},
		{"amqp durable from env", `source "amqp" {
    url     = "amqp://127.0.0.1:5672"
    address = "/queue/q"
    durable = env("QB_LENIENT_NOT_SET")
  }`, ""},
		{"jetstream bind from env, create_stream", `source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "in"
    jetstream {
      stream          = "S"
      durable         = "d"
      bind            = env("QB_LENIENT_NOT_SET")
      create_stream   = true
      stream_subjects = ["in"]
    }
  }`, ""},
		{"jetstream partitions from env", `source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "orders.>"
    jetstream {
      stream          = "S"
      durable         = "d-{partition}"
      partitions      = env("QB_LENIENT_NOT_SET")
      partition       = 2
      filter_subjects = ["orders.{partition}.*"]
    }
  }`, ""},
		// A filter's value is a string read as its type: no string
		// stand-in is a long, which was reported as an error.
		{"amqp filter value from env", `source "amqp" {
    url     = "amqp://127.0.0.1:5672"
    address = "/queue/q"
    filter "f1" {
      descriptor = "apache.org:selector-filter:string"
      type       = "long"
      value      = env("QB_LENIENT_NOT_SET")
    }
  }`, ""},
		{"amqp second filter's value from env", `source "amqp" {
    url     = "amqp://127.0.0.1:5672"
    address = "/queue/q"
    filter "f1" {
      type  = "long"
      value = "1"
    }
    filter "f2" {
      type  = "long"
      value = env("QB_LENIENT_NOT_SET")
    }
  }`, ""},
		{"amqp filter value from env, the next filter's type wrong", `source "amqp" {
    url     = "amqp://127.0.0.1:5672"
    address = "/queue/q"
    filter "f1" {
      value = env("QB_LENIENT_NOT_SET")
    }
    filter "f2" {
      type  = "banana"
      value = "1"
    }
  }`, "banana"},
		{"amqp url unset, the rest right", `source "amqp" {
    url     = env("QB_LENIENT_NOT_SET")
    address = "/queue/q"
  }`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "pipeline \"p\" {\n  " + tc.block + "\n  sink \"nats\" {\n    url     = \"nats://127.0.0.1:4222\"\n    subject = \"out\"\n  }\n}\n"
			l := NewLoader()
			l.AllowUnsetEnv()
			_, diags := l.LoadBytes("t.hcl", []byte(src))
			got := diagList(diags)
			switch {
			case tc.want == "" && diags.HasErrors():
				t.Errorf("refused:\n%s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("want an error naming %q, got:\n%s", tc.want, got)
			}
		})
	}
}

// A block given twice is one error, at the second, with the first's
// position as file:line:column; not also a "Missing source block" (gohcl
// leaves the field empty).
func TestDuplicateBlockIsOneError(t *testing.T) {
	_, diags := NewLoader().LoadBytes("t.hcl", []byte(`pipeline "p" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "a"
  }
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "b"
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "out"
  }
}
pipeline "p" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "a"
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "out"
  }
}
`))
	got := diagList(diags)
	if len(diags.Errs()) != 2 || strings.Contains(got, "Missing source block") {
		t.Errorf("want the duplicate source block and the duplicate pipeline, got:\n%s", got)
	}
	for _, want := range []string{"defined at t.hcl:2:3.", "already defined at t.hcl:1:10."} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in:\n%s", want, got)
		}
	}
}

// Blocks on one embedded store_dir share one server, started by the first
// to open: their settings must agree, or the later one failed to open for
// ever at run time (validate passed it).
func TestEmbeddedServerSettingsAgree(t *testing.T) {
	dir := t.TempDir()
	block := func(role, extra string) string {
		return role + " \"nats\" {\n    embedded  = true\n    store_dir = \"" + dir + "\"\n    subject   = \"" + role + "\"\n" + extra + "  }\n"
	}
	for _, tc := range []struct {
		name, src, sink string
		conflict        bool
	}{
		{"same port", "    port = 24873\n", "    port = 24873\n", false},
		{"no port either", "", "", false},
		{"ports differ", "    port = 24873\n", "    port = 24874\n", true},
		{"one port", "    port = 24873\n", "", true},
		{"users differ", "    user = \"a\"\n    password = \"s3cret-1\"\n", "    user = \"b\"\n    password = \"s3cret-1\"\n", true},
		{"passwords differ", "    user = \"a\"\n    password = \"s3cret-1\"\n", "    user = \"a\"\n    password = \"s3cret-2\"\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "pipeline \"p\" {\n  " + block("source", tc.src) + "  " + block("sink", tc.sink) + "}\n"
			_, diags := NewLoader().LoadBytes("t.hcl", []byte(src))
			got := diagList(diags)
			if conflict := strings.Contains(got, "Conflicting embedded server settings"); conflict != tc.conflict {
				t.Errorf("conflict %v, want %v:\n%s", conflict, tc.conflict, got)
			}
			if tc.conflict && (!strings.Contains(got, "t.hcl:2:3") || strings.Contains(got, "s3cret")) {
				t.Errorf("want the first block's position, no secret:\n%s", got)
			}
		})
	}
	// Across pipelines too, and not across store directories.
	other := t.TempDir()
	two := "pipeline \"a\" {\n  " + block("source", "    port = 24873\n") + "  sink \"nats\" {\n    url = \"nats://127.0.0.1:4222\"\n    subject = \"x\"\n  }\n}\n" +
		"pipeline \"b\" {\n  " + block("source", "    port = 24874\n") + "  sink \"nats\" {\n    embedded = true\n    store_dir = \"" + other + "\"\n    subject = \"y\"\n  }\n}\n"
	_, diags := NewLoader().LoadBytes("t.hcl", []byte(two))
	if got := diagList(diags); strings.Count(got, "Conflicting embedded server settings") != 1 {
		t.Errorf("want one conflict, pipeline b's source:\n%s", got)
	}
}

func TestPositionsInDetail(t *testing.T) {
	for in, want := range map[string]string{
		"Another was defined at a.hcl:1,3-16.":       "Another was defined at a.hcl:1:3.",
		"Another was defined at dir/a.hcl:1,3-2,5.":  "Another was defined at dir/a.hcl:1:3.",
		"no position here, 1,2-3 is not one either.": "no position here, 1,2-3 is not one either.",
	} {
		d := &hcl.Diagnostic{Detail: in}
		positionsInDetail(hcl.Diagnostics{d})
		if d.Detail != want {
			t.Errorf("%q → %q, want %q", in, d.Detail, want)
		}
	}
}

// An error about the second of a type of blocks points at that block's
// value, not at the first block.
func TestErrorInSecondBlockPointsAtIt(t *testing.T) {
	_, diags := NewLoader().LoadBytes("t.hcl", []byte(`pipeline "p" {
  source "amqp" {
    url     = "amqp://127.0.0.1:5672"
    address = "/queue/q"
    filter "f1" {
      type  = "long"
      value = "1"
    }
    filter "f2" {
      type  = "long"
      value = "two"
    }
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "out"
  }
}
`))
	errs := diags.Errs()
	if len(errs) != 1 {
		t.Fatalf("want one error, got:\n%s", diagList(diags))
	}
	d := errs[0].(*hcl.Diagnostic)
	if d.Subject == nil || d.Subject.Start.Line != 11 || !strings.Contains(d.Detail, `filter "f2": value:`) {
		t.Errorf("want the error at line 11 (f2's value), got:\n%s", diagList(diags))
	}
}

// Servers lists each embedded store once, from a source, a sink or a
// dead-letter sink, in the blocks' order, and nothing for a URL; its Hold
// starts the server and returns once it accepts connections.
func TestServers(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	src := fmt.Sprintf(`pipeline "one" {
  source "nats" {
    embedded  = true
    store_dir = %[1]q
    subject   = "in"
  }
  sink "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "out"
  }
}
pipeline "two" {
  source "nats" {
    url     = "nats://127.0.0.1:4222"
    subject = "in2"
  }
  sink "nats" {
    embedded  = true
    store_dir = %[1]q
    subject   = "out2"
  }
  dead_letter {
    sink "nats" {
      embedded  = true
      store_dir = %[2]q
      subject   = "dlq"
    }
  }
}
`, a, b)
	cfg, diags := NewLoader().LoadBytes("t.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diagList(diags))
	}
	servers := cfg.Servers()
	var keys []string
	for _, s := range servers {
		keys = append(keys, s.Key+" "+s.Described)
	}
	if want := []string{a + " no port (a random one), no credentials", b + " no port (a random one), no credentials"}; !slices.Equal(keys, want) {
		t.Fatalf("Servers() = %q, want %q", keys, want)
	}
	where, release, err := servers[0].Hold(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(where, "nats://"), 10*time.Second)
	if err != nil {
		t.Fatalf("Hold returned %s, which does not accept connections: %v", where, err)
	}
	c.Close()
}

// Two embedded servers (two store directories) cannot listen on one fixed
// port: validate passed it, and the second then failed to start for ever
// ("address already in use"). Random ports never conflict.
func TestEmbeddedServersOnOnePort(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	block := func(role, dir, port string) string {
		s := role + " \"nats\" {\n    embedded  = true\n    store_dir = \"" + dir + "\"\n    subject   = \"" + role + "\"\n"
		if port != "" {
			s += "    port = " + port + "\n"
		}
		return s + "  }\n"
	}
	for _, tc := range []struct {
		name, srcPort, sinkPort string
		conflict                bool
	}{
		{"one port", "24875", "24875", true},
		{"two ports", "24875", "24876", false},
		{"random ports", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "pipeline \"p\" {\n  " + block("source", a, tc.srcPort) + "  " + block("sink", b, tc.sinkPort) + "}\n"
			_, diags := NewLoader().LoadBytes("t.hcl", []byte(src))
			got := diagList(diags)
			if conflict := strings.Contains(got, "Conflicting embedded servers"); conflict != tc.conflict {
				t.Errorf("conflict %v, want %v:\n%s", conflict, tc.conflict, got)
			}
			if tc.conflict && (!strings.Contains(got, "t.hcl:2:3") || !strings.Contains(got, "127.0.0.1:24875")) {
				t.Errorf("want the first block's position and the address:\n%s", got)
			}
		})
	}
}
