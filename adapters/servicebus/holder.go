package servicebus

import "time"

// settleTimeout bounds a settlement or renewal the adapter makes on its own.
const settleTimeout = 15 * time.Second
