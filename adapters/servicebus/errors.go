package servicebus

import (
	"errors"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
)

var (
	errSettled = errors.New("servicebus: delivery already settled")
	errClosed  = errors.New("servicebus: closed")
)

// sdkCode returns the SDK's error code of err, if any.
func sdkCode(err error) azservicebus.Code {
	var e *azservicebus.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// condition returns the AMQP error condition in err, if any.
func condition(err error) amqp.ErrCond {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return ae.Condition
	}
	var le *amqp.LinkError
	if errors.As(err, &le) && le.RemoteErr != nil {
		return le.RemoteErr.Condition
	}
	var se *amqp.SessionError
	if errors.As(err, &se) && se.RemoteErr != nil {
		return se.RemoteErr.Condition
	}
	var ce *amqp.ConnError
	if errors.As(err, &ce) && ce.RemoteErr != nil {
		return ce.RemoteErr.Condition
	}
	// The SDK's *azservicebus.Error does not unwrap: read the condition
	// from go-amqp's rendering of the error it wraps.
	if m := conditionRE.FindStringSubmatch(err.Error()); m != nil {
		return amqp.ErrCond(m[1])
	}
	return ""
}

var conditionRE = regexp.MustCompile(`\*Error\{Condition: ([A-Za-z0-9:._-]+)`)

// Conditions the broker refuses an operation with for good. Everything
// else (server-busy, timeouts, lock losses, forced detaches, quota
// exceeded...) is worth retrying.
var fatalConditions = map[amqp.ErrCond]bool{
	amqp.ErrCondUnauthorizedAccess:        true,
	amqp.ErrCondNotFound:                  true,
	amqp.ErrCondNotAllowed:                true,
	amqp.ErrCondNotImplemented:            true,
	amqp.ErrCondInvalidField:              true,
	amqp.ErrCondDecodeError:               true,
	amqp.ErrCondMessageSizeExceeded:       true,
	"com.microsoft:entity-disabled":       true,
	"com.microsoft:argument-error":        true,
	"com.microsoft:argument-out-of-range": true,
	"com.microsoft:auth-failed":           true,
	"com.microsoft:publisher-revoked":     true,
}

// fatal reports whether retrying err cannot help: bad credentials, a
// missing or disabled entity, an operation the entity does not allow.
func fatal(err error) bool {
	switch sdkCode(err) {
	case azservicebus.CodeUnauthorizedAccess, azservicebus.CodeNotFound:
		return true
	}
	return fatalConditions[condition(err)]
}

// unauthorized reports a refusal of the credentials (a key that does not
// sign, a missing claim).
func unauthorized(err error) bool {
	c := condition(err)
	return sdkCode(err) == azservicebus.CodeUnauthorizedAccess || c == amqp.ErrCondUnauthorizedAccess || c == "com.microsoft:auth-failed"
}

// explain adds what a user can do about a well-known refusal.
func explain(err error, sessions bool) error {
	s := strings.ToLower(err.Error())
	switch {
	case !sessions && strings.Contains(s, "session") && (strings.Contains(s, "requires") || strings.Contains(s, "sessionful") || strings.Contains(s, "session-enabled")):
		return errors.Join(err, errors.New("the entity is session-enabled: add a sessions { } block to the source"))
	case sessions && strings.Contains(s, "session") && strings.Contains(s, "not") && strings.Contains(s, "enabled"):
		return errors.Join(err, errors.New("the entity is not session-enabled: remove the sessions block"))
	}
	return err
}
