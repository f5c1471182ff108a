# AMQP 1.0 queue → NATS JetStream: every message of an AMQP queue (RabbitMQ,
# Artemis, Qpid, Solace...) is published to a JetStream subject, with its
# typed application properties kept (an AMQP int arrives as a NATS header
# "42" whose type, Number.int, rides in the qbridge.envelope header).
#
#   export QBRIDGE_AMQP_URL=amqp://guest:guest@127.0.0.1:5672
#   qbridge validate configs/amqp-to-nats.hcl
#   qbridge run configs/amqp-to-nats.hcl
#
# Environment:
#   QBRIDGE_AMQP_URL              (required) the AMQP broker, amqp://user:pass@host:port
#   QBRIDGE_AMQP_TO_NATS_SOURCE   source address; default "/queue/orders" (RabbitMQ 3.x:
#                                 /queue/NAME declares the queue, /amq/queue/NAME uses an existing one)
#   QBRIDGE_NATS_URL              NATS server; default nats://127.0.0.1:4222
#   QBRIDGE_AMQP_TO_NATS_SUBJECT  subject published to; default "orders.from-amqp"
#   QBRIDGE_AMQP_TO_NATS_STREAM   JetStream stream storing it (created if missing); default "ORDERS_FROM_AMQP"
#
# See docs/adapter-amqp.md and docs/adapter-nats.md for every field.

pipeline "amqp-to-nats" {
  source "amqp" {
    url     = env("QBRIDGE_AMQP_URL")
    address = env("QBRIDGE_AMQP_TO_NATS_SOURCE", "/queue/orders")
    # credit is automatic: 1 on RabbitMQ 3.x (larger stalls there), else 64
    reconnect_backoff     = "200ms"
    reconnect_backoff_max = "5s"
  }

  sink "nats" {
    url     = env("QBRIDGE_NATS_URL", "nats://127.0.0.1:4222")
    subject = env("QBRIDGE_AMQP_TO_NATS_SUBJECT", "orders.from-amqp")
    jetstream {
      stream        = env("QBRIDGE_AMQP_TO_NATS_STREAM", "ORDERS_FROM_AMQP")
      create_stream = true
    }
  }

  mapping {
    policy = "reject"
  }
  retry {
    initial = "200ms"
    max     = "5s"
  }
  # An undeliverable message is rejected at the AMQP source (amqp:internal-error
  # with the reason); the broker drops it or dead-letters it per its own
  # configuration (RabbitMQ: the queue's dead-letter-exchange policy).
  dead_letter {
    native = true
  }
}
