package sqs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/qbridge/qbridge/bridge/driver"
	"github.com/qbridge/qbridge/mapping"
)

// Error codes that say "try again later" although SQS may mark them as the
// sender's fault.
var throttleCodes = map[string]bool{
	"RequestThrottled": true, "ThrottlingException": true, "Throttling": true,
	"KmsThrottled": true, "OverLimit": true, "ServiceUnavailable": true,
	"InternalError": true, "InternalFailure": true, "RequestTimeout": true,
}

// Error codes that concern the queue or the credentials, not the message:
// retrying them (with the engine's backoff) is right, dead-lettering every
// message is not.
var queueCodes = map[string]bool{
	"AccessDenied": true, "AccessDeniedException": true, "InvalidSecurity": true,
	"InvalidClientTokenId": true, "UnrecognizedClientException": true,
	"SignatureDoesNotMatch": true, "ExpiredToken": true, "RequestExpired": true,
	"MissingAuthenticationToken": true, "IncompleteSignature": true,
	"QueueDoesNotExist": true, "AWS.SimpleQueueService.NonExistentQueue": true,
	"QueueDeletedRecently": true,
	"KmsAccessDenied":      true, "KmsDisabled": true, "KmsInvalidKeyUsage": true,
	"KmsInvalidState": true, "KmsNotFound": true, "KmsOptInRequired": true,
}

// retryable reports whether a failed call can succeed when repeated:
// connection errors, timeouts, throttling and server faults. A cancelled
// context is not retryable.
func retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	switch retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) {
	case aws.TrueTernary:
		return true
	case aws.FalseTernary:
		return false // e.g. an endpoint whose name does not resolve
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return throttleCodes[ae.ErrorCode()] || ae.ErrorFault() == smithy.FaultServer
	}
	// Not an answer of the service (a dropped connection mid-body, a DNS
	// failure...): the service may well answer next time.
	return true
}

// permanentCall reports whether a whole call failed because of what it
// carried (a client fault that is neither throttling nor about the queue or
// the credentials).
func permanentCall(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	code := ae.ErrorCode()
	return clientFault(err, ae) && !throttleCodes[code] && !queueCodes[code] && !retryable(err)
}

// clientFault reports a client fault: so marked, or an unmodelled error
// answered with a 4xx status.
func clientFault(err error, ae smithy.APIError) bool {
	switch ae.ErrorFault() {
	case smithy.FaultClient:
		return true
	case smithy.FaultServer:
		return false
	}
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() >= 400 && re.HTTPStatusCode() < 500
}

// credentialCodes say that the service does not take the request's
// credentials at all (unlike AccessDenied, which a policy gives per action).
var credentialCodes = map[string]bool{
	"InvalidClientTokenId": true, "UnrecognizedClientException": true,
	"SignatureDoesNotMatch": true, "MissingAuthenticationToken": true,
	"IncompleteSignature": true, "InvalidSecurity": true, "ExpiredToken": true,
}

// credentialsRefused reports whether err says the service refused the
// request's credentials.
func credentialsRefused(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && credentialCodes[ae.ErrorCode()]
}

// isQueueMissing reports whether err says the queue does not exist.
func isQueueMissing(err error) bool {
	var q *types.QueueDoesNotExist
	if errors.As(err, &q) {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "QueueDoesNotExist" || ae.ErrorCode() == "AWS.SimpleQueueService.NonExistentQueue")
}

// EntryError is one failed entry of a batch call.
type EntryError struct {
	Op          string // "SendMessageBatch", "DeleteMessageBatch", ...
	Code        string
	Message     string
	SenderFault bool
}

func (e *EntryError) Error() string {
	fault := "server"
	if e.SenderFault {
		fault = "sender"
	}
	if e.Message == "" {
		return fmt.Sprintf("sqs: %s entry failed: %s (%s fault)", e.Op, e.Code, fault)
	}
	return fmt.Sprintf("sqs: %s entry failed: %s: %s (%s fault)", e.Op, e.Code, e.Message, fault)
}

// Permanent reports whether repeating the entry cannot help: the sender's
// fault, unless it is throttling or concerns the queue or the credentials.
func (e *EntryError) Permanent() bool {
	return e.SenderFault && !throttleCodes[e.Code] && !queueCodes[e.Code]
}

// entryError converts a failed batch entry, marking it driver.Permanent when
// repeating it cannot help.
func entryError(op string, f types.BatchResultErrorEntry) error {
	e := &EntryError{Op: op, Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
	if e.Permanent() && strings.Contains(e.Message, "must be shorter than") {
		// "Message must be shorter than N bytes": the queue's
		// MaximumMessageSize, below what the sink assumed. Dead-lettered
		// as too-large, as the codec's own size refusal is.
		return fmt.Errorf("%w: %w", mapping.TooLargef("sqs", "message", "larger than the queue's MaximumMessageSize"), e)
	}
	if e.Permanent() {
		return driver.Permanent(e)
	}
	if isThrottlingCode(e.Code) {
		return driver.Throttled(e)
	}
	return e
}

// callError wraps a whole-call failure for each entry of the call.
func callError(op string, err error) error {
	err = fmt.Errorf("sqs: %s: %w", op, err)
	if t := markThrottled(err); driver.IsThrottled(t) {
		return t // before permanentCall: a query-compatible code is a client fault it does not know
	}
	if permanentCall(err) {
		return driver.Permanent(err)
	}
	return err
}
