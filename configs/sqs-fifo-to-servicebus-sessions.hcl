# Amazon SQS FIFO queue → Azure Service Bus session queue: each
# MessageGroupId becomes a SessionId, and the messages of a group arrive in
# the order SQS delivered them (one at a time per group, groups in
# parallel). Several qbridge instances may drain the same FIFO queue: SQS
# hands a group to one consumer at a time. MessageDeduplicationId becomes
# the MessageId, so a queue with duplicate detection absorbs the rare
# redelivery of at-least-once delivery.
#
#   export QBRIDGE_SQS_FIFO_TO_SERVICEBUS_QUEUE_URL=https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo
#   export QBRIDGE_SERVICEBUS_CONNECTION_STRING='Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=...;SharedAccessKey=...'
#   qbridge validate configs/sqs-fifo-to-servicebus-sessions.hcl
#
# Environment:
#   QBRIDGE_SQS_FIFO_TO_SERVICEBUS_QUEUE_URL  (required) the SQS FIFO queue (.fifo) to drain
#   QBRIDGE_SQS_FIFO_TO_SERVICEBUS_ENDPOINT   SQS endpoint override (fauxqs, LocalStack...);
#                                             default "" = AWS
#   AWS_REGION                                region; default us-east-1
#   QBRIDGE_SERVICEBUS_CONNECTION_STRING      (required) the namespace's connection string
#                                             (Send rights)
#   QBRIDGE_SERVICEBUS_MANAGEMENT_ENDPOINT    where migrate counts the queue and learns that it
#                                             takes sessions; default "" = https://<namespace>
#                                             (set it for an emulator)
#   QBRIDGE_SQS_FIFO_TO_SERVICEBUS_QUEUE      the session-enabled Service Bus queue;
#                                             default "orders"
#   AWS credentials come from the SDK chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY,
#   profiles, web identity, instance role).
#
# See docs/adapter-sqs.md and docs/adapter-servicebus.md for every field.

pipeline "sqs-fifo-to-servicebus-sessions" {
  source "sqs" {
    region    = env("AWS_REGION", "us-east-1")
    queue_url = env("QBRIDGE_SQS_FIFO_TO_SERVICEBUS_QUEUE_URL")
    endpoint  = env("QBRIDGE_SQS_FIFO_TO_SERVICEBUS_ENDPOINT", "")

    wait_time          = "20s" # long polling
    visibility_timeout = "60s" # the lock below extends it while a message is held
  }

  sink "servicebus" {
    connection_string = env("QBRIDGE_SERVICEBUS_CONNECTION_STRING")
    queue             = env("QBRIDGE_SQS_FIFO_TO_SERVICEBUS_QUEUE", "orders") # SessionId = MessageGroupId

    management_endpoint = env("QBRIDGE_SERVICEBUS_MANAGEMENT_ENDPOINT", "")
  }

  mapping {
    # Anything Service Bus cannot hold is refused with the reason (logged). With no
    # dead_letter block it goes back to SQS, with a growing backoff, until the queue's
    # redrive policy moves it to the queue's dead-letter queue; its group waits behind it
    # meanwhile. Add dead_letter { sink "sqs" { ... } } to keep it aside with the reason.
    policy = "reject"
  }
  ordering {
    max_in_flight = 1000
    per_group     = 1 # strict order within a group (session)
  }
  retry {
    initial = "200ms"
    max     = "10s"
  }
  lock {
    extend_every = "20s" # shorter than visibility_timeout
    extend_by    = "60s"
  }
}
