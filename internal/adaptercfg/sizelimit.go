package adaptercfg

// EntityLimit is the size limit a sink encodes for when the broker told the
// entity's own (entity > 0: an SQS queue's MaximumMessageSize, a Service
// Bus queue's MaxMessageSizeInKilobytes): it replaces the default where
// max_message_size is not set (configured 0), within what the protocol
// carries (most), and bounds a configured one. Without it, resolved (the
// configured size or the default) stands. A queue set below the default
// refused what the codec let through, and a dry run counted it as written
// (migration audit).
func EntityLimit(configured, resolved, entity, most int) int {
	switch {
	case entity <= 0:
		return resolved
	case configured == 0:
		return min(entity, most)
	default:
		return min(configured, entity)
	}
}
