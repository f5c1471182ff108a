# Amazon SQS standard queue → Azure Service Bus queue, written for
# "qbridge migrate" (it runs as a daemon pipeline too): typed message
# attributes become typed application properties, MessageId is kept, and
# what Service Bus cannot take goes to an SQS dead-letter queue with the
# reason, so a migration accounts for every message.
#
#   export QBRIDGE_SQS_TO_SERVICEBUS_QUEUE_URL=https://sqs.eu-west-1.amazonaws.com/123456789012/orders
#   export QBRIDGE_SQS_TO_SERVICEBUS_DLQ_URL=https://sqs.eu-west-1.amazonaws.com/123456789012/orders-dlq
#   export QBRIDGE_SERVICEBUS_CONNECTION_STRING='Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=...;SharedAccessKey=...'
#   qbridge validate -strict configs/sqs-to-servicebus.hcl
#   qbridge migrate -dry-run configs/sqs-to-servicebus.hcl      # what would happen
#   qbridge migrate -report report.json configs/sqs-to-servicebus.hcl
#
# Environment:
#   QBRIDGE_SQS_TO_SERVICEBUS_QUEUE_URL   (required) the SQS queue to drain
#   QBRIDGE_SQS_TO_SERVICEBUS_DLQ_URL     (required) an SQS queue for messages Service
#                                         Bus refuses (with DeadLetterReason)
#   QBRIDGE_SQS_TO_SERVICEBUS_ENDPOINT    SQS endpoint override (fauxqs, LocalStack...);
#                                         default "" = AWS
#   AWS_REGION                            region; default us-east-1
#   QBRIDGE_SERVICEBUS_CONNECTION_STRING  (required) the namespace's connection string
#                                         (Send rights; Manage to count the queue)
#   QBRIDGE_SQS_TO_SERVICEBUS_QUEUE       the Service Bus queue; default "orders"
#   QBRIDGE_SERVICEBUS_MANAGEMENT_ENDPOINT where migrate counts the queue; default ""
#                                         = https://<namespace> (set it for an emulator)
#   AWS credentials come from the SDK chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY,
#   profiles, web identity, instance role).
#
# See docs/migrate.md, docs/adapter-sqs.md and docs/adapter-servicebus.md.

pipeline "sqs-to-servicebus" {
  source "sqs" {
    region    = env("AWS_REGION", "us-east-1")
    queue_url = env("QBRIDGE_SQS_TO_SERVICEBUS_QUEUE_URL")
    endpoint  = env("QBRIDGE_SQS_TO_SERVICEBUS_ENDPOINT", "")
  }

  sink "servicebus" {
    connection_string = env("QBRIDGE_SERVICEBUS_CONNECTION_STRING")
    queue             = env("QBRIDGE_SQS_TO_SERVICEBUS_QUEUE", "orders")

    management_endpoint = env("QBRIDGE_SERVICEBUS_MANAGEMENT_ENDPOINT", "")
  }

  mapping {
    policy = "reject" # a message Service Bus cannot hold is dead-lettered with the reason
  }

  dead_letter {
    sink "sqs" {
      region    = env("AWS_REGION", "us-east-1")
      queue_url = env("QBRIDGE_SQS_TO_SERVICEBUS_DLQ_URL")
      endpoint  = env("QBRIDGE_SQS_TO_SERVICEBUS_ENDPOINT", "")
    }
  }
}
