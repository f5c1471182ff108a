# Amazon SQS → NATS JetStream: drains an SQS queue (standard or FIFO) into a
# JetStream stream, one subject per group key (MessageGroupId), so consumers
# can read each group in order. Typed message attributes become NATS headers;
# their exact SQS types (Number.int, Binary.png...) ride in the
# qbridge.envelope header, so a way back to SQS restores them byte for byte.
#
#   export QBRIDGE_SQS_SOURCE_QUEUE_URL=https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo
#   qbridge validate configs/sqs-to-nats.hcl
#   qbridge run configs/sqs-to-nats.hcl
#
# Environment:
#   QBRIDGE_SQS_SOURCE_QUEUE_URL   the queue to drain (required)
#   QBRIDGE_SQS_ENDPOINT           endpoint of an SQS-compatible service, e.g.
#                                  http://127.0.0.1:4566 (default: AWS). Set it
#                                  whenever the queue URL's host is not one to
#                                  call (LocalStack, fauxqs, ElasticMQ)
#   QBRIDGE_SQS_REGION             region (default: the AWS SDK chain, else the
#                                  queue URL's region, else us-east-1)
#   QBRIDGE_SQS_ACCESS_KEY_ID,     static keys (default: none, the AWS SDK
#   QBRIDGE_SQS_SECRET_ACCESS_KEY  chain: AWS_* variables, profile, IRSA, ECS,
#                                  EC2 role); set both or neither
#   QBRIDGE_NATS_URL               NATS server(s) (default nats://127.0.0.1:4222)
#   QBRIDGE_SQS_TO_NATS_SUBJECT    subject prefix (default "from-sqs"): messages
#                                  go to PREFIX.<group key>, "_" for none
#   QBRIDGE_SQS_TO_NATS_STREAM     stream (default FROM_SQS), created on
#                                  PREFIX.* when missing
#
# See docs/adapter-sqs.md and docs/adapter-nats.md for every field.

pipeline "sqs-to-nats" {
  source "sqs" {
    queue_url         = env("QBRIDGE_SQS_SOURCE_QUEUE_URL")
    endpoint          = env("QBRIDGE_SQS_ENDPOINT", "")
    region            = env("QBRIDGE_SQS_REGION", "")
    access_key_id     = env("QBRIDGE_SQS_ACCESS_KEY_ID", "")
    secret_access_key = env("QBRIDGE_SQS_SECRET_ACCESS_KEY", "")

    wait_time          = "20s" # long polling
    visibility_timeout = "60s" # the lock below extends it while a message is held
  }

  sink "nats" {
    url     = env("QBRIDGE_NATS_URL", "nats://127.0.0.1:4222")
    subject = "${env("QBRIDGE_SQS_TO_NATS_SUBJECT", "from-sqs")}.{group}"
    jetstream {
      stream        = env("QBRIDGE_SQS_TO_NATS_STREAM", "FROM_SQS")
      create_stream = true # on PREFIX.* when missing
    }
  }

  mapping {
    policy = "reject" # anything NATS cannot hold goes to the dead-letter queue, with the reason
  }

  lock {
    extend_every = "20s" # shorter than visibility_timeout
    extend_by    = "60s"
  }
}
