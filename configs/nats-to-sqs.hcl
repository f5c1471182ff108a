# NATS JetStream → Amazon SQS: a durable JetStream consumer feeds an SQS queue
# (standard or FIFO). The NATS group header (Qbridge-Group) becomes the FIFO
# MessageGroupId, Nats-Msg-Id the deduplication id; headers become typed
# message attributes (their SQS types restored from the qbridge.envelope
# header). A scheduled message (ScheduledAt, up to 15 minutes ahead) is
# delayed on a standard queue with DelaySeconds.
#
#   export QBRIDGE_SQS_SINK_QUEUE_URL=https://sqs.eu-west-1.amazonaws.com/123456789012/invoices
#   export QBRIDGE_SQS_DLQ_URL=https://sqs.eu-west-1.amazonaws.com/123456789012/invoices-dlq
#   qbridge validate configs/nats-to-sqs.hcl
#   qbridge run configs/nats-to-sqs.hcl
#
# Environment:
#   QBRIDGE_SQS_SINK_QUEUE_URL     the queue to fill (required)
#   QBRIDGE_SQS_ENDPOINT           endpoint of an SQS-compatible service, e.g.
#                                  http://127.0.0.1:4566 (default: AWS). Set it
#                                  whenever the queue URL's host is not one to
#                                  call (LocalStack, fauxqs, ElasticMQ)
#   QBRIDGE_SQS_REGION             region (default: the AWS SDK chain, else the
#                                  queue URL's region, else us-east-1)
#   QBRIDGE_SQS_ACCESS_KEY_ID,     static keys (default: none, the AWS SDK
#   QBRIDGE_SQS_SECRET_ACCESS_KEY  chain); set both or neither
#   QBRIDGE_SQS_DLQ_URL            dead-letter queue for messages SQS cannot
#                                  take (required; may be the same service)
#   QBRIDGE_NATS_URL               NATS server(s) (default nats://127.0.0.1:4222)
#   QBRIDGE_NATS_TO_SQS_SUBJECT    subjects to read (default "to-sqs.>")
#   QBRIDGE_NATS_TO_SQS_STREAM     stream (default TO_SQS), created on the
#                                  subject when missing
#
# See docs/adapter-nats.md and docs/adapter-sqs.md for every field.

pipeline "nats-to-sqs" {
  source "nats" {
    url     = env("QBRIDGE_NATS_URL", "nats://127.0.0.1:4222")
    subject = env("QBRIDGE_NATS_TO_SQS_SUBJECT", "to-sqs.>")
    jetstream {
      stream        = env("QBRIDGE_NATS_TO_SQS_STREAM", "TO_SQS")
      durable       = "qbridge-to-sqs"
      create_stream = true
      ack_wait      = "60s" # the lock below sends InProgress while a message is held
      # A message SQS cannot take, not even in the dead-letter queue (over
      # 256 KiB: NATS takes up to 1 MB), would otherwise come back forever;
      # its last delivery is terminated with the reason (docs/adapter-nats.md).
      max_deliver   = 10
    }
  }

  sink "sqs" {
    queue_url         = env("QBRIDGE_SQS_SINK_QUEUE_URL")
    endpoint          = env("QBRIDGE_SQS_ENDPOINT", "")
    region            = env("QBRIDGE_SQS_REGION", "")
    access_key_id     = env("QBRIDGE_SQS_ACCESS_KEY_ID", "")
    secret_access_key = env("QBRIDGE_SQS_SECRET_ACCESS_KEY", "")
  }

  mapping {
    policy = "reject" # too many attributes, a name SQS refuses, a binary body: dead-lettered with the reason
  }

  lock {
    extend_every = "20s"
    extend_by    = "60s"
  }

  dead_letter {
    sink "sqs" {
      queue_url         = env("QBRIDGE_SQS_DLQ_URL")
      endpoint          = env("QBRIDGE_SQS_ENDPOINT", "")
      region            = env("QBRIDGE_SQS_REGION", "")
      access_key_id     = env("QBRIDGE_SQS_ACCESS_KEY_ID", "")
      secret_access_key = env("QBRIDGE_SQS_SECRET_ACCESS_KEY", "")
    }
  }
}
