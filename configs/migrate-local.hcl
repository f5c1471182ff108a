# qbridge migrate on this machine, no cloud account: moves what the quick
# start wrote to its stream DEMO_OUT into a stream ARCHIVE on the same
# embedded NATS server, drained, verified and resumable
# (docs/migrate.md, "A first try on this machine").
#
#   qbridge run configs/quickstart.hcl      # then, in a second terminal:
#   for i in $(seq 1 500); do
#     qbridge send -url nats://127.0.0.1:4222 -subject demo.in -jetstream -attr tenant=t$((i % 5)) "order $i" >/dev/null
#   done
#   # stop the daemon (Ctrl-C): one process at a time runs a server on a store_dir
#   qbridge migrate -dry-run configs/migrate-local.hcl
#   qbridge migrate -rate 100 configs/migrate-local.hcl   # Ctrl-C midway, then run it again

pipeline "archive" {
  source "nats" {
    embedded  = true
    store_dir = "${env("HOME")}/.local/state/qbridge/quickstart"
    port      = 4222

    subject = "demo.out"
    jetstream {
      stream  = "DEMO_OUT" # written by the quick start's pipeline
      durable = "archive"  # how far the move got: a rerun resumes from here
      # Messages a killed run (kill -9) held come back after this long, and
      # the rerun waits for them; Ctrl-C hands them back at once. The
      # default is 30s.
      ack_wait = "15s"
    }
  }

  lock {
    extend_every = "5s" # a third of ack_wait: a late extension does not let the server redeliver a message still held
  }

  sink "nats" {
    embedded  = true
    store_dir = "${env("HOME")}/.local/state/qbridge/quickstart"
    port      = 4222

    subject = "archive.orders"
    jetstream {
      stream        = "ARCHIVE"
      create_stream = true # stream ARCHIVE on archive.orders, made on first write
    }
  }
}
