# Azure Service Bus queue → Amazon SQS (or an SQS-compatible endpoint).
# Broker properties (CorrelationId, Subject, To, ReplyTo, ReplyToSessionId,
# PartitionKey, TimeToLive...) and typed application properties survive: an
# int becomes Number.int, a ulong Number.ulong, a uuid String.uuid, a
# timestamp Number.timestamp. What SQS has no field for rides in the
# qbridge.envelope attribute; under the "encode" policy, attributes beyond
# SQS's 10 move there too, so the way back (SQS → Service Bus) restores the
# message exactly. Messages qbridge cannot deliver go to the queue's own
# dead-letter queue ($DeadLetterQueue) with the reason.
#
#   export QBRIDGE_SERVICEBUS_CONNECTION_STRING='Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=...;SharedAccessKey=...'
#   export QBRIDGE_SERVICEBUS_TO_SQS_QUEUE_URL=https://sqs.eu-west-1.amazonaws.com/123456789012/orders
#   qbridge validate configs/servicebus-to-sqs.hcl
#
# Environment:
#   QBRIDGE_SERVICEBUS_CONNECTION_STRING  (required) the namespace's connection string
#                                         (Listen rights); the test server's or the
#                                         emulator's with UseDevelopmentEmulator=true
#   QBRIDGE_SERVICEBUS_MANAGEMENT_ENDPOINT where migrate counts the queue; default ""
#                                         = https://<namespace> (set it for an emulator)
#   QBRIDGE_SERVICEBUS_TO_SQS_QUEUE       the Service Bus queue to drain; default "orders"
#                                         (a session-enabled queue needs a sessions { }
#                                         block in the source: docs/adapter-servicebus.md)
#   QBRIDGE_SERVICEBUS_TO_SQS_QUEUE_URL   (required) the SQS queue URL (a standard queue;
#                                         a FIFO queue takes the SessionId as MessageGroupId)
#   QBRIDGE_SERVICEBUS_TO_SQS_ENDPOINT    SQS endpoint override (fauxqs, LocalStack...);
#                                         default "" = AWS
#   AWS_REGION                            region; default us-east-1
#   AWS credentials come from the SDK chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY,
#   profiles, web identity, instance role).
#
# See docs/adapter-servicebus.md and docs/adapter-sqs.md for every field.

pipeline "servicebus-to-sqs" {
  source "servicebus" {
    connection_string = env("QBRIDGE_SERVICEBUS_CONNECTION_STRING")
    queue             = env("QBRIDGE_SERVICEBUS_TO_SQS_QUEUE", "orders")

    management_endpoint = env("QBRIDGE_SERVICEBUS_MANAGEMENT_ENDPOINT", "")
  }

  sink "sqs" {
    region    = env("AWS_REGION", "us-east-1")
    queue_url = env("QBRIDGE_SERVICEBUS_TO_SQS_QUEUE_URL")
    endpoint  = env("QBRIDGE_SERVICEBUS_TO_SQS_ENDPOINT", "")
  }

  mapping {
    # SQS holds 10 attributes: the rest ride in the envelope, reversibly
    policy = "encode"
  }
  retry {
    initial      = "200ms"
    max          = "10s"
    max_attempts = 20
  }
  lock {
    extend_every = "20s" # shorter than the queue's lock duration (default 1 minute)
    extend_by    = "60s"
  }
  # Service Bus's own dead-letter queue, with DeadLetterReason and
  # DeadLetterErrorDescription
  dead_letter { native = true }
}
