// Package sqsmap translates between qbridge's message model (package
// mapping) and Amazon SQS, using the aws-sdk-go-v2 SQS types. It does no I/O.
//
//   - Decode turns a received types.Message into a *mapping.Message,
//     verifying MD5OfBody and MD5OfMessageAttributes when present.
//   - Encode turns a *mapping.Message into an Outbound (body, message
//     attributes, AWSTraceHeader, group/dedup ids, delay), enforcing every SQS
//     rule on names, data types, values, counts and sizes under the
//     mapping.Policy, and writing what SQS cannot hold into the carry envelope
//     attribute qbridge.envelope.
//   - Deliver says what SQS hands a consumer for an Outbound.
//   - MD5OfBody and MD5OfAttributes are the SQS digests.
//
// # JSON rendering
//
// ParseJSON and RenderJSON use the AWS JSON protocol shape of one received
// message, as `aws sqs receive-message` prints an element of "Messages":
//
//	{
//	  "MessageId": "…",
//	  "ReceiptHandle": "…",
//	  "MD5OfBody": "…",
//	  "Body": "…",
//	  "Attributes": {"SentTimestamp": "1700000000000", "MessageGroupId": "g", …},
//	  "MD5OfMessageAttributes": "…",
//	  "MessageAttributes": {
//	    "n": {"StringValue": "42", "DataType": "Number.int"},
//	    "p": {"BinaryValue": "<base64>", "DataType": "Binary.png"}
//	  }
//	}
//
// Field names are exact (case-sensitive); an unknown field is an error naming
// it. A digest that is present must match; an absent one is not checked.
// RenderJSON encodes for a FIFO queue when the message has a group key and
// renders what the receiver gets (Deliver), with both digests, a MessageId
// derived from the content and no ReceiptHandle.
//
// See docs/mapping-sqs.md for the mapping table.
package sqsmap
