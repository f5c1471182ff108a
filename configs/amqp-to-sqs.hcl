# AMQP 1.0 queue → Amazon SQS (or an SQS-compatible endpoint). Typed
# application properties become typed message attributes: an AMQP int is
# Number.int, a long Number.long, a uuid String.uuid, a binary Binary, a
# timestamp Number.timestamp; what SQS cannot hold is refused (policy
# "reject") and the message goes to the dead-letter queue with the reason.
#
#   export QBRIDGE_AMQP_URL=amqp://guest:guest@127.0.0.1:5672
#   export QBRIDGE_AMQP_TO_SQS_QUEUE_URL=https://sqs.eu-west-1.amazonaws.com/123456789012/orders
#   qbridge validate configs/amqp-to-sqs.hcl
#
# Environment:
#   QBRIDGE_AMQP_URL               (required) the AMQP broker, amqp://user:pass@host:port
#   QBRIDGE_AMQP_TO_SQS_SOURCE     source address; default "/queue/orders"
#   QBRIDGE_AMQP_TO_SQS_QUEUE_URL  (required) the SQS queue URL
#   QBRIDGE_AMQP_TO_SQS_ENDPOINT   SQS endpoint override (fauxqs, LocalStack...); default "" = AWS
#   AWS_REGION                     region; default us-east-1
#   QBRIDGE_AMQP_TO_SQS_DLQ        AMQP address of the dead-letter queue; default "/queue/orders-dlq"
#   AWS credentials come from the SDK chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY,
#   profiles, web identity, instance role).
#
# See docs/adapter-amqp.md and docs/adapter-sqs.md for every field.

pipeline "amqp-to-sqs" {
  source "amqp" {
    url     = env("QBRIDGE_AMQP_URL")
    address = env("QBRIDGE_AMQP_TO_SQS_SOURCE", "/queue/orders")
  }

  sink "sqs" {
    region    = env("AWS_REGION", "us-east-1")
    queue_url = env("QBRIDGE_AMQP_TO_SQS_QUEUE_URL")
    endpoint  = env("QBRIDGE_AMQP_TO_SQS_ENDPOINT", "")
  }

  mapping {
    # a binary body or an attribute SQS refuses is dead-lettered with the reason
    policy = "reject"
  }
  retry {
    initial      = "200ms"
    max          = "10s"
    max_attempts = 20
  }
  # Dead letters go, as the AMQP source delivered them, to another AMQP queue
  # with application properties DeadLetterReason and DeadLetterErrorDescription.
  dead_letter {
    sink "amqp" {
      url     = env("QBRIDGE_AMQP_URL")
      address = env("QBRIDGE_AMQP_TO_SQS_DLQ", "/queue/orders-dlq")
    }
  }
}
