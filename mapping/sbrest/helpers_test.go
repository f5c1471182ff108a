package sbrest

import (
	"errors"

	"github.com/qbridge/qbridge/mapping"
)

func asReject(err error, r **mapping.RejectError) bool { return errors.As(err, r) }
