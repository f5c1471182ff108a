# NATS JetStream → AMQP 1.0: a durable JetStream consumer feeds an AMQP queue
# or address. NATS headers come back as typed application properties when
# the qbridge.envelope header records their type (as qbridge writes it), so a
# message that came from AMQP goes back with its int32, uuid, timestamp...
#
#   export QBRIDGE_AMQP_URL=amqp://guest:guest@127.0.0.1:5672
#   qbridge validate configs/nats-to-amqp.hcl
#   qbridge run configs/nats-to-amqp.hcl
#
# Environment:
#   QBRIDGE_AMQP_URL              (required) the AMQP broker, amqp://user:pass@host:port
#   QBRIDGE_NATS_URL              NATS server; default nats://127.0.0.1:4222
#   QBRIDGE_NATS_TO_AMQP_STREAM   JetStream stream to read (created if missing); default "ORDERS_FROM_AMQP"
#   QBRIDGE_NATS_TO_AMQP_SUBJECT  subject (consumer filter); default "orders.from-amqp"
#   QBRIDGE_NATS_TO_AMQP_DURABLE  durable consumer name; default "qbridge-nats-to-amqp"
#   QBRIDGE_NATS_TO_AMQP_TARGET   AMQP target address; default "/queue/orders-copy"
#                                 (RabbitMQ 3.x: /queue/NAME declares a non-durable queue unless
#                                 target_durable = true; it must match how the queue exists)
#
# See docs/adapter-nats.md and docs/adapter-amqp.md for every field.

pipeline "nats-to-amqp" {
  source "nats" {
    url     = env("QBRIDGE_NATS_URL", "nats://127.0.0.1:4222")
    subject = env("QBRIDGE_NATS_TO_AMQP_SUBJECT", "orders.from-amqp")
    jetstream {
      stream        = env("QBRIDGE_NATS_TO_AMQP_STREAM", "ORDERS_FROM_AMQP")
      durable       = env("QBRIDGE_NATS_TO_AMQP_DURABLE", "qbridge-nats-to-amqp")
      create_stream = true
      ack_wait      = "30s"
    }
  }

  sink "amqp" {
    url     = env("QBRIDGE_AMQP_URL")
    address = env("QBRIDGE_NATS_TO_AMQP_TARGET", "/queue/orders-copy")
    # every message is sent durable (header durable = true); the target
    # terminus is not durable, as a plain /queue/NAME attach declares it
    send_timeout = "30s"
  }

  retry {
    initial = "200ms"
    max     = "5s"
  }
  # A message the AMQP broker refuses for good is terminated at the
  # JetStream consumer (Term with the reason), never redelivered.
  dead_letter {
    native = true
  }
}
