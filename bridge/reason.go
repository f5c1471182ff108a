package bridge

import (
	"errors"

	"github.com/qbridge/qbridge/mapping"
)

// Attributes a dead-letter sink's message gets, named as Service Bus names
// its dead-letter properties so tools that know those find them.
const (
	AttrDeadLetterReason      = "DeadLetterReason"
	AttrDeadLetterDescription = "DeadLetterErrorDescription"
)

// Dead-letter reason codes: short, stable, and the only values of the
// "reason" metric label.
const (
	ReasonCorrupt          = "corrupt"           // the source could not decode it (driver.DecodeErrorer)
	ReasonMapping          = "mapping"           // the pipeline's mapping rules refused the message
	ReasonRejected         = "rejected"          // the sink's encoder refused it (mapping.RejectError)
	ReasonTooLarge         = "too-large"         // the sink's encoder found it too large
	ReasonPermanent        = "permanent"         // the sink refused it for good (driver.Permanent)
	ReasonRetriesExhausted = "retries-exhausted" // transient failures outlasted the retry policy
)

// reasons are the reason codes, for the metric's series.
var reasons = []string{ReasonCorrupt, ReasonMapping, ReasonRejected, ReasonTooLarge, ReasonPermanent, ReasonRetriesExhausted}

// maxDescription bounds DeadLetterErrorDescription; brokers limit property
// sizes and the reason is in the first bytes anyway.
const maxDescription = 1024

// SinkReason classifies a permanent sink error: the reason code a message
// it refused is dead-lettered (or, refused by the dead-letter sink too,
// reported undeliverable) with.
func SinkReason(err error) string {
	var rej *mapping.RejectError
	if errors.As(err, &rej) {
		if rej.TooLarge {
			return ReasonTooLarge
		}
		return ReasonRejected
	}
	return ReasonPermanent
}

// truncate is mapping.TruncateUTF8, named for this package's callers.
func truncate(s string, n int) string { return mapping.TruncateUTF8(s, n) }
