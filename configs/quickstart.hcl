# qbridge quick start: qbridge runs its own NATS server (embedded, JetStream
# on, listening on 127.0.0.1:4222 only) and one pipeline that moves messages
# from the JetStream subject demo.in to demo.out through the mapping layer.
#
#   go build -o bin/qbridge ./cmd/qbridge && export PATH=$PWD/bin:$PATH
#   qbridge run configs/quickstart.hcl
#   qbridge send -url nats://127.0.0.1:4222 -subject demo.in -jetstream -attr tenant=acme -attr qty:Number.int=3 'hello'
#   qbridge tail -url nats://127.0.0.1:4222 -subject demo.out -jetstream -n 1
#
# A message the pipeline cannot deliver goes to demo.dlq with the reason, e.g.
# one whose carry envelope is not JSON:
#   qbridge send -url nats://127.0.0.1:4222 -subject demo.in -jetstream -header qbridge.envelope=oops 'bad'
#   qbridge tail -url nats://127.0.0.1:4222 -subject demo.dlq -jetstream -n 1
#
# See docs/adapter-nats.md for every field.

pipeline "demo" {
  source "nats" {
    # Source and sink name the same store_dir, so they share one in-process
    # server; it stops when both are closed. The stored messages survive
    # restarts as long as the directory does: it is per user, under $HOME
    # (in the image, /var/lib/qbridge).
    embedded  = true
    store_dir = "${env("HOME")}/.local/state/qbridge/quickstart"
    port      = 4222

    subject = "demo.in"
    jetstream {
      stream        = "DEMO_IN"
      durable       = "demo"
      create_stream = true # stream DEMO_IN on demo.in, made on first start
      ack_wait      = "30s"
      max_deliver   = 5 # the 5th failure terminates (dead-letters) the message
    }
  }

  mapping {
    # Order per tenant: the group key comes from the "tenant" attribute
    # (empty when a message has none), and "qty" is renamed.
    group_key = "{attr.tenant?}"
    rename {
      from = "qty"
      to   = "quantity"
    }
  }

  sink "nats" {
    embedded  = true
    store_dir = "${env("HOME")}/.local/state/qbridge/quickstart"
    port      = 4222

    subject = "demo.out"
    jetstream {
      stream        = "DEMO_OUT"
      create_stream = true # stream DEMO_OUT on demo.out
    }
  }

  # What cannot be delivered (a message that cannot be decoded or mapped,
  # one the sink refuses, or one still failing when retries run out) is
  # published here with its DeadLetterReason and DeadLetterErrorDescription
  # attributes, then acknowledged: nothing is dropped, nothing loops.
  dead_letter {
    sink "nats" {
      embedded  = true
      store_dir = "${env("HOME")}/.local/state/qbridge/quickstart"
      port      = 4222

      subject = "demo.dlq"
      jetstream {
        stream        = "DEMO_DLQ"
        create_stream = true # stream DEMO_DLQ on demo.dlq
      }
    }
  }
}
