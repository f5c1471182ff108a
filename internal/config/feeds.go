package config

import "github.com/hashicorp/hcl/v2"

// feedsSummary is the summary of the diagnostic that refuses a sink (or
// dead-letter sink) writing into its own pipeline's source.
const feedsSummary = "Sink feeds its own source"

// checkFeeds refuses a sink that provably writes into the pipeline's own
// source: each message it writes would be received again, written again,
// and so on without end, at full speed. A block that did not decode
// (errors, or unknown values under validate without -strict) has no Config
// and is not checked.
// role is "sink" or "dead-letter sink"; rng is the sink block's.
func checkFeeds(e *eval, role string, src, sink Adapter, rng hcl.Range) {
	why, loops := feeds(src, sink)
	if !loops {
		return
	}
	consequence := "Every message it writes comes back through the source and is written again, without end: one message would circulate at full speed and never leave the pipeline."
	if role != "sink" {
		consequence = "Every message it dead-letters comes back through the source and is dead-lettered again for the same reason, without end."
	}
	e.errorf(rng, feedsSummary, "This %s %s. %s Write to another destination, or read from another source.", role, why, consequence)
}

// SinkFeedsSource reports whether p's sink provably writes into p's source,
// why saying how. Decoding refuses such pipelines; this is for pipelines
// derived after it, such as migrate's dead-letter job (WithDeadLetterSource
// and WithDeadLetterSinkAsSink), whose source is known only then.
func (p *Pipeline) SinkFeedsSource() (why string, loops bool) {
	return feeds(p.Spec.Source, p.Spec.Sink)
}

// feeds asks the kind's Feeds hook; adapters of different kinds never
// compare, nor blocks that did not decode to a Config.
func feeds(src, sink Adapter) (string, bool) {
	if src.Config == nil || sink.Config == nil || src.Kind != sink.Kind {
		return "", false
	}
	k := lookupKind(src.Kind)
	if k == nil || k.feeds == nil {
		return "", false
	}
	return k.feeds(src.Config, sink.Config)
}
