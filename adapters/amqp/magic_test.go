package amqp

import "github.com/Azure/go-amqp"

// magic values that tests patch into types go-amqp cannot decode (on the
// wire, through rewriteConn): a uuid becomes a decimal128 (same 16 bytes),
// an int a char. The guard's own tests are in internal/amqpguard.
var (
	magicUUID = amqp.UUID{0xde, 0xc1, 0x28, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d}
	magicInt  = int32(0x0c4a0c4a)
)
