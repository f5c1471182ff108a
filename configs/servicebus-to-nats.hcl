# Azure Service Bus queue → NATS JetStream, one subject per session
# (SessionId = group key; "_" for messages without one). Broker properties
# and typed application properties become NATS headers; their exact types
# (int, ulong, uuid, timestamp...) and the properties NATS has no header
# for ride in the qbridge.envelope header, so a way back to Service Bus
# restores them.
#
#   export QBRIDGE_SERVICEBUS_CONNECTION_STRING='Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=...;SharedAccessKey=...'
#   qbridge validate configs/servicebus-to-nats.hcl
#   qbridge run configs/servicebus-to-nats.hcl
#
# Environment:
#   QBRIDGE_SERVICEBUS_CONNECTION_STRING  (required) the namespace's connection string
#                                         (Listen rights)
#   QBRIDGE_SERVICEBUS_MANAGEMENT_ENDPOINT where migrate counts the queue; default ""
#                                         = https://<namespace> (set it for an emulator)
#   QBRIDGE_SERVICEBUS_TO_NATS_QUEUE      the queue to drain; default "events" (not
#                                         "orders": sqs-fifo-to-servicebus-sessions.hcl
#                                         fills that one, and it is session-enabled)
#   QBRIDGE_NATS_URL                      NATS server(s); default nats://127.0.0.1:4222
#   QBRIDGE_SERVICEBUS_TO_NATS_SUBJECT    subject prefix; default "from-servicebus":
#                                         messages go to PREFIX.<session id>
#   QBRIDGE_SERVICEBUS_TO_NATS_STREAM     stream; default FROM_SERVICEBUS, created on
#                                         PREFIX.* when missing
#
# A session-enabled queue needs a sessions block in the source (see
# docs/adapter-servicebus.md, "Sessions"): without it the pipeline says so
# and retries; see docs/adapter-nats.md for the sink.

pipeline "servicebus-to-nats" {
  source "servicebus" {
    connection_string = env("QBRIDGE_SERVICEBUS_CONNECTION_STRING")
    queue             = env("QBRIDGE_SERVICEBUS_TO_NATS_QUEUE", "events")
    # On a session-enabled queue, add: sessions {}

    management_endpoint = env("QBRIDGE_SERVICEBUS_MANAGEMENT_ENDPOINT", "")
  }

  sink "nats" {
    url     = env("QBRIDGE_NATS_URL", "nats://127.0.0.1:4222")
    subject = "${env("QBRIDGE_SERVICEBUS_TO_NATS_SUBJECT", "from-servicebus")}.{group}"
    jetstream {
      stream        = env("QBRIDGE_SERVICEBUS_TO_NATS_STREAM", "FROM_SERVICEBUS")
      create_stream = true # on PREFIX.* when missing
    }
  }

  mapping {
    policy = "reject" # anything NATS cannot hold goes to the dead-letter queue, with the reason
  }
  lock {
    extend_every = "20s" # shorter than the queue's lock duration (default 1 minute)
    extend_by    = "60s"
  }
  dead_letter { native = true }
}
