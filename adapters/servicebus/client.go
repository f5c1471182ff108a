package servicebus

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/qbridge/qbridge/internal/amqpguard"
	"github.com/qbridge/qbridge/internal/logpace"
	"github.com/qbridge/qbridge/mapping/amqpmap"
	"github.com/qbridge/qbridge/mapping/sbmap"
)

// guardSettings says whether and how the connection is guarded.
type guardSettings struct {
	mode     func() string // scan, full, off (read at each dial)
	log      *amqpguard.Log
	onPoison func(reason string, size int)
	// onTLSError is told when the server's certificate fails verification
	// (the SDK reports it only as a lost connection).
	onTLSError func(error)
	// dialLog, if set, is told of a failed dial at once (paced): the SDK
	// retries a namespace it cannot reach for about 50 s before the open
	// returns its error, and until then the log said nothing of why.
	dialLog *slog.Logger
}

// newSDKClient builds the azservicebus client. The SDK has one hook that
// hands it a ready net.Conn, NewWebSocketConn (meant for AMQP over
// WebSockets); the adapter uses it to dial AMQP itself, TLS included, so
// that the decode guard sits between the socket and go-amqp. The SDK
// ignores its own TLS settings on such a connection, and passes the
// WebSocket URL it would have used, which the dialer ignores.
func newSDKClient(c *connSettings, g guardSettings, cred azcore.TokenCredential) (*azservicebus.Client, error) {
	var pace *logpace.Pacer
	if g.dialLog != nil {
		pace = logpace.New(1, 30*time.Second)
	}
	opts := &azservicebus.ClientOptions{
		ApplicationID: c.appID,
		RetryOptions: azservicebus.RetryOptions{
			MaxRetries: c.maxRetries, RetryDelay: c.retryDelay, MaxRetryDelay: c.retryMax,
		},
		NewWebSocketConn: func(ctx context.Context, _ azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
			conn, err := dialAMQP(ctx, c, g)
			if err != nil && pace != nil && ctx.Err() == nil {
				pace.Do(func(leftOut int64) {
					g.dialLog.Warn("servicebus: cannot connect to the namespace; the Azure SDK tries again (max_retries, retry_delay) before the open fails",
						"namespace", c.description, "error", err, logpace.LeftOutKey, leftOut)
				})
			}
			return conn, err
		},
	}
	if c.cs != nil {
		return azservicebus.NewClientFromConnectionString(c.cs.raw, opts)
	}
	return azservicebus.NewClient(c.namespace, cred, opts)
}

// dialAMQP opens the TCP (and TLS) connection to the namespace or the
// configured endpoint and wraps it in the guard.
func dialAMQP(ctx context.Context, c *connSettings, g guardSettings) (net.Conn, error) {
	var d net.Dialer
	addr := net.JoinHostPort(c.dialHost, c.dialPort)
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if !c.plain {
		host, _ := hostPort(c.namespace, "")
		tc := tls.Client(nc, &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12, RootCAs: c.rootCAs})
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			err = fmt.Errorf("tls handshake with %s: %w", addr, err)
			var cv *tls.CertificateVerificationError
			if errors.As(err, &cv) && g.onTLSError != nil {
				g.onTLSError(err)
			}
			return nil, err
		}
		nc = tc
	}
	mode := guardOff
	if g.mode != nil {
		mode = g.mode()
	}
	if mode == guardOff || g.log == nil {
		return nc, nil
	}
	// A source keeps the original bytes: the engine dead-letters the message
	// with them (driver.DecodeErrorer).
	return amqpguard.Wrap(nc, amqpguard.Options{Full: mode == guardFull, Log: g.log, OnPoison: g.onPoison, Check: sdkCheck,
		KeepRaw: g.onPoison != nil}), nil
}

var deadLetterBytes = []byte("DeadLetter")

// sdkCheck finds what go-amqp decodes but the SDK cannot take: it asserts
// that the application properties DeadLetterReason and
// DeadLetterErrorDescription are strings and panics otherwise (a .NET
// producer may set them to anything). Messages without those bytes are
// not decoded.
func sdkCheck(p []byte) error {
	if !bytes.Contains(p, deadLetterBytes) {
		return nil
	}
	msg, err := amqpmap.UnmarshalMessage(p)
	if err != nil {
		return err
	}
	for _, k := range []string{sbmap.DeadLetterReasonProperty, sbmap.DeadLetterDescriptionProperty} {
		if v, ok := msg.ApplicationProperties[k]; ok {
			if _, isString := v.(string); !isString {
				return fmt.Errorf("application property %q is %T, not a string (the Service Bus SDK cannot take it)", k, v)
			}
		}
	}
	return nil
}
