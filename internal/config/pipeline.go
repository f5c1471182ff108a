package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/internal/adaptercfg"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/rules"
)

type pipelineBlock struct {
	Name      string    `hcl:"name,label"`
	NameRange hcl.Range `hcl:"name,label_range"`
	DefRange  hcl.Range `hcl:",def_range"`

	Source     *adapterBlock    `hcl:"source,block"`
	Sink       *adapterBlock    `hcl:"sink,block"`
	Mapping    *mappingBlock    `hcl:"mapping,block"`
	Ordering   *orderingBlock   `hcl:"ordering,block"`
	Batch      *batchBlock      `hcl:"batch,block"`
	Retry      *retryBlock      `hcl:"retry,block"`
	Lock       *lockBlock       `hcl:"lock,block"`
	DeadLetter *deadLetterBlock `hcl:"dead_letter,block"`

	ShutdownTimeout *hcl.Attribute `hcl:"shutdown_timeout,optional"`
	StallAfter      *hcl.Attribute `hcl:"stall_after,optional"`
	Readiness       *hcl.Attribute `hcl:"readiness,optional"`

	Body       hcl.Body        `hcl:",body"`
	duplicated map[string]bool // block types gohcl found twice (and left empty)
}

// adapterBlock is source "kind" { ... }: the body belongs to the adapter.
type adapterBlock struct {
	Kind      string    `hcl:"kind,label"`
	KindRange hcl.Range `hcl:"kind,label_range"`
	DefRange  hcl.Range `hcl:",def_range"`
	Body      hcl.Body  `hcl:",remain"`
}

type mappingBlock struct {
	Policy         *hcl.Attribute `hcl:"policy,optional"`
	CarrySource    *hcl.Attribute `hcl:"carry_source,optional"`
	MaxMessageSize *hcl.Attribute `hcl:"max_message_size,optional"`
	Envelope       *hcl.Attribute `hcl:"envelope,optional"`
	Rename         []*renameBlock `hcl:"rename,block"`
	Drop           *hcl.Attribute `hcl:"drop,optional"`
	Set            []*setBlock    `hcl:"set,block"`
	GroupKey       *hcl.Attribute `hcl:"group_key,optional"`
	DedupID        *hcl.Attribute `hcl:"dedup_id,optional"`
	Subject        *hcl.Attribute `hcl:"subject,optional"`
	To             *hcl.Attribute `hcl:"to,optional"`
	ContentType    *hcl.Attribute `hcl:"content_type,optional"`
}

// Required attributes are *hcl.Attribute too (gohcl does not require
// pointer fields), checked by required.
type renameBlock struct {
	From     *hcl.Attribute `hcl:"from"`
	To       *hcl.Attribute `hcl:"to"`
	DefRange hcl.Range      `hcl:",def_range"`
}

type setBlock struct {
	Name      string         `hcl:"name,label"`
	NameRange hcl.Range      `hcl:"name,label_range"`
	Type      *hcl.Attribute `hcl:"type"`
	Value     *hcl.Attribute `hcl:"value,optional"`
	Template  *hcl.Attribute `hcl:"template,optional"`
	DefRange  hcl.Range      `hcl:",def_range"`
}

type orderingBlock struct {
	MaxInFlight *hcl.Attribute `hcl:"max_in_flight,optional"`
	PerGroup    *hcl.Attribute `hcl:"per_group,optional"`
	Ungrouped   *hcl.Attribute `hcl:"ungrouped,optional"`
}

type batchBlock struct {
	Size        *hcl.Attribute `hcl:"size,optional"`
	Linger      *hcl.Attribute `hcl:"linger,optional"`
	Concurrency *hcl.Attribute `hcl:"concurrency,optional"`
}

type retryBlock struct {
	Initial     *hcl.Attribute `hcl:"initial,optional"`
	Max         *hcl.Attribute `hcl:"max,optional"`
	Multiplier  *hcl.Attribute `hcl:"multiplier,optional"`
	Jitter      *hcl.Attribute `hcl:"jitter,optional"`
	MaxAttempts *hcl.Attribute `hcl:"max_attempts,optional"`
	MaxElapsed  *hcl.Attribute `hcl:"max_elapsed,optional"`
}

type lockBlock struct {
	ExtendEvery *hcl.Attribute `hcl:"extend_every,optional"`
	ExtendBy    *hcl.Attribute `hcl:"extend_by,optional"`
}

type deadLetterBlock struct {
	Native   *hcl.Attribute `hcl:"native,optional"`
	Sink     *adapterBlock  `hcl:"sink,block"`
	DefRange hcl.Range      `hcl:",def_range"`
}

// Upper bounds that catch typos (an extra zero) rather than real limits.
const (
	maxInFlightLimit = 1_000_000
	maxBatchSize     = 10_000
	maxConcurrency   = 1024
	maxSize          = 1 << 30
)

// decodePipeline checks one pipeline block; nil when it has errors (which
// are in e.diags).
func decodePipeline(e *eval, b *pipelineBlock) *Pipeline {
	before := len(e.diags)
	if !validName(b.Name) {
		e.errorf(b.NameRange, "Invalid pipeline name",
			"Pipeline names are used in metrics and logs: letters, digits, '_', '-' and '.', not %q.", b.Name)
	}
	p := &Pipeline{Name: b.Name, DefRange: b.DefRange, Readiness: ReadinessRequired}
	e.oneOf(b.Readiness, []string{ReadinessRequired, ReadinessIgnored}, &p.Readiness)
	s := &p.Spec

	// The mapping block first: its policy is part of the sinks' configuration.
	decodeMapping(e, b.Mapping, &s.Mapping)

	if b.Source == nil {
		if !b.duplicated["source"] {
			e.errorf(b.DefRange, "Missing source block", "Pipeline %q needs a source block, such as source \"nats\" { ... }.", b.Name)
		}
	} else {
		s.Source = decodeAdapter(e, "source", b.Source, s.Mapping.options())
	}
	if b.Sink == nil {
		if !b.duplicated["sink"] {
			e.errorf(b.DefRange, "Missing sink block", "Pipeline %q needs a sink block, such as sink \"sqs\" { ... }.", b.Name)
		}
	} else {
		s.Sink = decodeAdapter(e, "sink", b.Sink, s.Mapping.options())
		checkFeeds(e, "sink", s.Source, s.Sink, b.Sink.DefRange)
	}
	if d := b.DeadLetter; d != nil {
		var native bool
		e.boolean(d.Native, &native)
		switch {
		case native && d.Sink != nil:
			e.errorf(d.Sink.DefRange, "Conflicting dead-letter destinations",
				"A dead_letter block sets either native = true or a sink block, not both.")
		case native:
			s.DeadLetter.Native = true
			if k := lookupKind(s.Source.Kind); k != nil && k.noNativeDeadLetter != nil && s.Source.Config != nil {
				if why := k.noNativeDeadLetter(s.Source.Config); why != "" {
					rng := d.DefRange
					if d.Native != nil {
						rng = d.Native.Expr.Range()
					}
					e.errorf(rng, "No native dead-letter queue",
						"dead_letter { native = true } moves a failing message to the source broker's own dead-letter queue, but %s: give the dead_letter block a sink block instead, such as sink \"%s\" { ... } naming the queue that should take them.", why, s.Source.Kind)
				}
			}
		case d.Sink != nil:
			a := decodeAdapter(e, "sink", d.Sink, deadLetterOptions())
			s.DeadLetter.Sink = &a
			checkFeeds(e, "dead-letter sink", s.Source, a, d.Sink.DefRange)
		default:
			e.errorf(d.DefRange, "Missing dead-letter destination",
				"A dead_letter block needs native = true (the source broker's dead-letter queue) or a sink block, such as sink \"sqs\" { ... }. Without the block, failing messages are nacked and the broker's redrive policy applies.")
		}
	}
	s.Engine = decodeEngine(e, b)
	checkLock(e, s.Source, s.Engine.Lock, b)
	if e.diags[before:].HasErrors() {
		return nil
	}
	return p
}

// decodeAdapter decodes and validates an adapter block with the registry.
func decodeAdapter(e *eval, role string, b *adapterBlock, opt mapping.Options) Adapter {
	k := lookupKind(b.Kind)
	if k == nil {
		e.diags = append(e.diags, kindDiag(role, b.Kind, b.KindRange))
		return Adapter{}
	}
	decode := k.decodeSink
	if role == "source" {
		decode = k.decodeSource
	}
	cfg, diags, err := decode(b.Body, e.ctx, opt)
	if e.unknownOK && onlyUnknown(diags) {
		// Values from unset variables (validate without -strict): check
		// the block without them, so that one unset secret hides only the
		// checks that need its value.
		decodeKnown(e, role, b, decode, opt)
		return Adapter{Kind: b.Kind}
	}
	e.diags = append(e.diags, dropUnknownNoise(diags)...)
	if diags.HasErrors() {
		return Adapter{}
	}
	if err != nil {
		e.diags = append(e.diags, invalidAdapter(role, b, err))
		return Adapter{}
	}
	if k.server != nil {
		key, settings, described, listen := k.server(role, cfg)
		checkSharedServer(e, b, key, settings, described, listen)
	}
	return Adapter{Kind: b.Kind, Config: cfg}
}

// checkSharedServer refuses a block that starts the same server as an
// earlier one (an embedded NATS server on the same store_dir) with other
// settings: the first to open starts it, and the other then failed to open
// for ever at run time ("already running with another port or
// credentials"), whichever opened first.
//
// Servers of different keys cannot listen on one fixed address: the
// second then failed to start for ever ("address already in use").
func checkSharedServer(e *eval, b *adapterBlock, key, settings, described, listen string) {
	if key == "" || e.servers == nil {
		return
	}
	first, seen := e.servers[key]
	if !seen {
		if listen != "" {
			for other, use := range e.servers {
				if use.listen == listen {
					e.errorf(b.DefRange, "Conflicting embedded servers",
						"This block starts an embedded server on store_dir %s and the one at %s another on store_dir %s, both listening on %s: one address takes one server. Give one of them another port, or both the same store_dir to share one server.",
						key, position(use.at), other, listen)
					return
				}
			}
		}
		e.servers[key] = serverUse{settings: settings, described: described, listen: listen, at: b.DefRange}
		return
	}
	if first.settings == settings {
		return
	}
	differ := fmt.Sprintf("that one has %s, this one %s", first.described, described)
	if first.described == described {
		differ = "their passwords or tokens differ"
	}
	e.errorf(b.DefRange, "Conflicting embedded server settings",
		"This block and the one at %s start one embedded server (store_dir %s), so they must agree: %s. Give both the same port, user, password and token, or another store_dir.",
		position(first.at), key, differ)
}

// decodeKnown decodes and validates an adapter block with a stand-in for
// each value that is not known, and reports what is wrong with the rest.
// An unknown string (most often a URL, a connection string or a password
// from the environment) gets the first of stringStandIns that its own checks
// pass; a number or a bool (also a string from env() in such a field) is
// tried each way (numberStandIns, boolStandIns), and an error must hold
// every way to be reported; an unknown of any other type is left out. A
// configuration check the stand-ins cannot decide is not reported: an
// error about a value stood in for (the real value may be right), or any
// error while a value is left out (its default may be what the error is
// about: embedded false, and store_dir "only valid with embedded = true").
// Nothing is returned: with stand-ins, the configuration is not the one
// that will run.
func decodeKnown(e *eval, role string, b *adapterBlock, decode func(hcl.Body, *hcl.EvalContext, mapping.Options) (any, hcl.Diagnostics, error), opt mapping.Options) {
	sb, ok := b.Body.(*hclsyntax.Body)
	if !ok {
		return
	}
	unknown := map[string]*unknownValue{}
	unknownValues(sb, e.ctx, "", unknown)
	// A first pass finds the fields that do not take a string (retype);
	// then every way of the values tried each way (numbers, bools).
	diags, _, _ := tryStandIns(decode, sb, e.ctx, opt, unknown)
	e.diags = append(e.diags, diags...)
	if diags.HasErrors() {
		return
	}
	var ways []*unknownValue
	combos := 1
	for _, u := range unknown {
		if u.allWays && u.i >= 0 {
			ways = append(ways, u)
			combos *= len(u.cands)
		}
	}
	if combos > 16 {
		return // too many to try each way
	}
	var found error
	for combo := range combos {
		k := combo
		for _, u := range ways {
			u.i, k = k%len(u.cands), k/len(u.cands)
		}
		diags, err, decided := tryStandIns(decode, sb, e.ctx, opt, unknown)
		if diags.HasErrors() || !decided || err == nil {
			return // not for the stand-ins to say
		}
		if found == nil {
			found = err
		}
	}
	if found != nil {
		e.diags = append(e.diags, invalidAdapter(role, b, found))
	}
}

// unknownValue is an attribute whose value is not known, and what may
// stand in for it.
type unknownValue struct {
	rng     hcl.Range
	cands   []cty.Value // tried in turn
	i       int         // the one in use; -1: left out
	allWays bool        // a number or a bool: an error must hold with each of cands
	retyped bool        // its field turned out not to take a string
}

// tryStandIns decodes and validates with the stand-ins, moving an unknown
// string to its next stand-in while Validate refuses it. It returns gohcl's
// diagnostics (but those about the stand-ins), and an error of Validate
// about a value that was known; decided is false when the stand-ins cannot
// decide (a value left out, or no stand-in its checks pass).
func tryStandIns(decode func(hcl.Body, *hcl.EvalContext, mapping.Options) (any, hcl.Diagnostics, error), sb *hclsyntax.Body, ctx *hcl.EvalContext, opt mapping.Options, unknown map[string]*unknownValue) (hcl.Diagnostics, error, bool) {
	for {
		_, diags, err := decode(standIn(sb, "", unknown), ctx, opt)
		if u, d := aboutUnknown(diags, unknown); u != nil {
			// The field does not take a string (a number, a bool from
			// env()): a stand-in of its type, or left out.
			u.retype(d.Detail)
			continue
		}
		var out hcl.Diagnostics
		for _, d := range diags {
			if d.Severity == hcl.DiagError && d.Summary == "Missing required argument" && mentionsAny(d.Detail, unknown) {
				continue
			}
			out = append(out, d)
		}
		if out.HasErrors() || err == nil {
			return out, nil, true
		}
		for _, u := range unknown {
			if u.i < 0 {
				return out, nil, false
			}
		}
		path, found := adaptercfg.PathOf(err)
		if !found {
			return out, nil, false // about the block as a whole
		}
		u, isUnknown := unknown[fieldOf(path)]
		switch {
		case !isUnknown:
			return out, err, true
		case u.allWays || u.i+1 == len(u.cands):
			return out, nil, false // no stand-in passes its checks
		}
		u.i++
	}
}

// retype gives an unknown whose field refused a string (gohcl's detail
// says what it wants) a stand-in of that type, once; else it is left out.
func (u *unknownValue) retype(detail string) {
	switch {
	case u.retyped || u.allWays:
		u.i = -1
	case strings.Contains(detail, "number is required"):
		u.cands, u.i, u.allWays = numberStandIns, 0, true
	case strings.Contains(detail, "bool is required"):
		u.cands, u.i, u.allWays = boolStandIns, 0, true
	default:
		u.i = -1
	}
	u.retyped = true
}

// numberStandIns and boolStandIns stand in for an unknown number or bool,
// each in turn: a check that depends on the value (partitions = 1 makes
// partition 2 wrong) holds, or not, for all of them.
var (
	numberStandIns = []cty.Value{cty.NumberIntVal(1), cty.NumberIntVal(1024)}
	boolStandIns   = []cty.Value{cty.True, cty.False}
)

// aboutUnknown finds an error in diags at the value of an unknown that is
// stood in for.
func aboutUnknown(diags hcl.Diagnostics, unknown map[string]*unknownValue) (*unknownValue, *hcl.Diagnostic) {
	for _, d := range diags {
		if d.Severity != hcl.DiagError || d.Subject == nil {
			continue
		}
		for _, u := range unknown {
			if u.i >= 0 && d.Subject.Filename == u.rng.Filename && d.Subject.Overlaps(u.rng) {
				return u, d
			}
		}
	}
	return nil, nil
}

// invalidAdapter is the diagnostic for an adapter block its Validate
// refused, at the value it is about where it can be found.
func invalidAdapter(role string, b *adapterBlock, err error) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Invalid %s %s configuration", b.Kind, role),
		Detail:   err.Error() + ".",
		Subject:  locate(b.Body, err, b.DefRange).Ptr(),
	}
}

// stringStandIns are the strings tried in turn for an unknown one: plain text,
// then the forms of the adapters' addresses (an SQS queue URL, AMQP and
// NATS URLs, a Service Bus connection string and namespace).
var stringStandIns = []cty.Value{
	cty.StringVal("unset"),
	cty.StringVal("https://unset.invalid/000000000000/unset"),
	cty.StringVal("amqp://unset.invalid"),
	cty.StringVal("nats://unset.invalid:4222"),
	cty.StringVal("Endpoint=sb://unset.servicebus.windows.net/;SharedAccessKeyName=unset;SharedAccessKey=unset"),
	cty.StringVal("unset.servicebus.windows.net"),
}

// unknownValues records body's attributes whose value is not known, by
// path ("url", "jetstream.durable"), in nested blocks too, with what may
// stand in for them.
func unknownValues(body *hclsyntax.Body, ctx *hcl.EvalContext, prefix string, unknown map[string]*unknownValue) {
	for name, a := range body.Attributes {
		v, _ := a.Expr.Value(ctx)
		if v.IsWhollyKnown() {
			continue
		}
		u := &unknownValue{rng: a.Expr.Range()}
		switch v.Type() {
		case cty.String:
			u.cands = stringStandIns
		case cty.Number:
			u.cands, u.allWays = numberStandIns, true
		case cty.Bool:
			u.cands, u.allWays = boolStandIns, true
		default:
			u.i = -1
		}
		unknown[prefix+name] = u
	}
	nth := map[string]int{}
	for _, blk := range body.Blocks {
		unknownValues(blk.Body, ctx, prefix+blockSegment(blk.Type, nth)+".", unknown)
	}
}

// blockSegment is a nested block's element in a field path: its type, with
// its index among the blocks of that type after the first ("filter",
// "filter[1]"), as the adapters name it in their errors. nth counts the
// blocks of each type seen so far in one body.
func blockSegment(typ string, nth map[string]int) string {
	n := nth[typ]
	nth[typ]++
	if n == 0 {
		return typ
	}
	return fmt.Sprintf("%s[%d]", typ, n)
}

// standIn copies body with each unknown attribute replaced by its
// stand-in, or left out.
func standIn(body *hclsyntax.Body, prefix string, unknown map[string]*unknownValue) *hclsyntax.Body {
	out := *body
	out.Attributes = make(hclsyntax.Attributes, len(body.Attributes))
	for name, a := range body.Attributes {
		u, ok := unknown[prefix+name]
		switch {
		case !ok:
			out.Attributes[name] = a
		case u.i >= 0:
			c := *a
			c.Expr = &hclsyntax.LiteralValueExpr{Val: u.cands[u.i], SrcRange: a.Expr.Range()}
			out.Attributes[name] = &c
		}
	}
	out.Blocks = make(hclsyntax.Blocks, len(body.Blocks))
	nth := map[string]int{}
	for i, blk := range body.Blocks {
		c := *blk
		c.Body = standIn(blk.Body, prefix+blockSegment(blk.Type, nth)+".", unknown)
		out.Blocks[i] = &c
	}
	return &out
}

// fieldOf is a Validate error's path as unknownValues keys it: without the
// index of a list's element ("filter_subjects[0]" is about
// "filter_subjects"), and without the index of the first of a type of
// blocks ("filter[0].value" is "filter.value"; "filter[1].value" stays).
func fieldOf(path string) string {
	parts := strings.Split(path, ".")
	last := len(parts) - 1
	if i := strings.IndexByte(parts[last], '['); i >= 0 {
		parts[last] = parts[last][:i]
	}
	for i := range parts[:last] {
		parts[i] = strings.TrimSuffix(parts[i], "[0]")
	}
	return strings.Join(parts, ".")
}

// mentionsAny reports whether a diagnostic's detail names ("url") the last
// element of one of the paths.
func mentionsAny(detail string, paths map[string]*unknownValue) bool {
	for p := range paths {
		if i := strings.LastIndexByte(p, '.'); i >= 0 {
			p = p[i+1:]
		}
		if strings.Contains(detail, `"`+p+`"`) {
			return true
		}
	}
	return false
}

// onlyUnknown reports whether diags has errors and all of them are gohcl's
// "value must be known".
func onlyUnknown(diags hcl.Diagnostics) bool {
	errs := diags.Errs()
	for _, d := range diags {
		if d.Severity == hcl.DiagError && !(d.Summary == "Unsuitable value type" && strings.Contains(d.Detail, "value must be known")) {
			return false
		}
	}
	return len(errs) > 0
}

// dropUnknownNoise removes gohcl's "value must be known" errors that follow
// a failed function call (env of an unset variable...): the call's own error
// says what is wrong, at the argument.
func dropUnknownNoise(diags hcl.Diagnostics) hcl.Diagnostics {
	if len(diags) < 2 {
		return diags
	}
	out := diags[:0:0]
	for _, d := range diags {
		if d.Summary == "Unsuitable value type" && strings.Contains(d.Detail, "value must be known") {
			continue
		}
		out = append(out, d)
	}
	return out
}

// locate finds the field an adapter's Validate error is about (an
// adaptercfg.FieldError: "subject", "jetstream.ack_wait",
// "filter_subjects[0]"), so the diagnostic can point at the value;
// otherwise, or when the field is not written in the block, at the block.
func locate(body hcl.Body, err error, def hcl.Range) hcl.Range {
	sb, ok := body.(*hclsyntax.Body)
	path, found := adaptercfg.PathOf(err)
	if !ok || !found {
		return def
	}
	parts := strings.Split(path, ".")
	for i, part := range parts {
		// "filter_subjects[0]": an element of a list attribute;
		// "filter[1]": the second filter block.
		part, index, _ := strings.Cut(part, "[")
		if i == len(parts)-1 {
			if a, ok := sb.Attributes[part]; ok {
				return a.Expr.Range()
			}
		}
		nth, _ := strconv.Atoi(strings.TrimSuffix(index, "]"))
		var next *hclsyntax.Body
		for _, blk := range sb.Blocks {
			if blk.Type != part {
				continue
			}
			if nth > 0 {
				nth--
				continue
			}
			if i == len(parts)-1 {
				return blk.DefRange()
			}
			next = blk.Body
			break
		}
		if next == nil {
			return def
		}
		sb = next
	}
	return def
}

func decodeMapping(e *eval, b *mappingBlock, m *Mapping) {
	if b == nil {
		return
	}
	var policy string
	if e.str(b.Policy, &policy) {
		p, err := mapping.ParsePolicy(policy)
		if err != nil {
			e.errorf(b.Policy.Expr.Range(), "Invalid mapping policy", "%s.", err)
		}
		m.Policy = p
	}
	e.boolean(b.CarrySource, &m.CarrySource)
	e.integer(b.MaxMessageSize, 0, maxSize, &m.MaxMessageSize)
	var env string
	if e.str(b.Envelope, &env) {
		mode, err := mapping.ParseEnvelopeMode(env)
		switch {
		case err != nil:
			e.errorf(b.Envelope.Expr.Range(), "Invalid envelope mode", "%s.", err)
		case mode == mapping.EnvelopeOff && m.Policy == mapping.Encode:
			e.errorf(b.Envelope.Expr.Range(), "Conflicting mapping settings",
				"policy = \"encode\" moves what the target cannot take into the carry envelope, which envelope = \"off\" never writes. Use policy \"reject\" or \"drop\" with the envelope off.")
		}
		m.Envelope = mode
	}

	r := &m.Rules
	for _, rb := range b.Rename {
		if !e.required(rb.DefRange, "from", rb.From) || !e.required(rb.DefRange, "to", rb.To) {
			continue
		}
		var rn rules.Rename
		okFrom, okTo := e.str(rb.From, &rn.From), e.str(rb.To, &rn.To)
		if okFrom && rn.From == "" {
			e.errorf(rb.From.Expr.Range(), "Invalid rename", "\"from\" must name an attribute.")
		}
		if okTo && rn.To == "" {
			e.errorf(rb.To.Expr.Range(), "Invalid rename", "\"to\" must name an attribute.")
		}
		r.Rename = append(r.Rename, rn)
	}
	e.strings(b.Drop, &r.Drop)
	for _, sb := range b.Set {
		st, ok := decodeSet(e, sb)
		if ok {
			r.Set = append(r.Set, st)
		}
	}
	for _, f := range []struct {
		a   *hcl.Attribute
		dst *string
	}{
		{b.GroupKey, &r.GroupKey}, {b.DedupID, &r.DedupID}, {b.Subject, &r.Subject},
		{b.To, &r.To}, {b.ContentType, &r.ContentType},
	} {
		if e.str(f.a, f.dst) {
			if _, err := rules.Parse(*f.dst); err != nil {
				e.errorf(f.a.Expr.Range(), "Invalid template", "%s: %s.", f.a.Name, templateError(err))
			}
		}
	}
}

func templateError(err error) string {
	var se *rules.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at character %d of the template)", se.Msg, se.Offset+1)
	}
	return err.Error()
}

func decodeSet(e *eval, b *setBlock) (rules.Set, bool) {
	if b.Name == "" {
		e.errorf(b.NameRange, "Invalid attribute name", "The set block's label names the attribute to set and must not be empty.")
		return rules.Set{}, false
	}
	if b.Value != nil && b.Template != nil {
		e.errorf(b.Template.Expr.Range(), "Conflicting set arguments", "A set block has either value (a constant) or template (rendered per message, such as \"{correlation_id}\"), not both.")
		return rules.Set{}, false
	}
	valueAttr := b.Value
	if b.Template != nil {
		valueAttr = b.Template
	}
	if !e.required(b.DefRange, "type", b.Type) {
		return rules.Set{}, false
	}
	if valueAttr == nil {
		e.errorf(b.DefRange, "Missing required argument",
			"The argument \"value\" is required, but no definition was found: a set block has value (a constant) or template (rendered per message, such as \"{correlation_id}\").")
		return rules.Set{}, false
	}
	var dt, text string
	okT, okV := e.str(b.Type, &dt), e.str(valueAttr, &text)
	if !okT || !okV {
		return rules.Set{}, false
	}
	_, _, err := mapping.SplitDataType(dt)
	if err != nil {
		e.errorf(b.Type.Expr.Range(), "Invalid attribute type", "%s. Types are spelled as SQS data types: \"String\", \"Number\", \"Binary\", optionally with a label such as \"Number.int\" or \"String.uuid\".", err)
		return rules.Set{}, false
	}
	if b.Template != nil {
		if text == "" {
			e.errorf(b.Template.Expr.Range(), "Empty template", "A template that is empty would set nothing: give it a placeholder, such as \"{correlation_id}\", or use value for a constant.")
			return rules.Set{}, false
		}
		if _, err := rules.Parse(text); err != nil {
			e.errorf(b.Template.Expr.Range(), "Invalid template", "template: %s.", templateError(err))
			return rules.Set{}, false
		}
		return rules.Set{Name: b.Name, Type: dt, Template: text}, true
	}
	v, err := mapping.ParseValue(dt, text)
	if err == nil {
		err = mapping.CheckText(dt, text)
	}
	if err != nil {
		e.errorf(b.Value.Expr.Range(), "Invalid attribute value", "%s.", err)
		return rules.Set{}, false
	}
	return rules.Set{Name: b.Name, Value: v}, true
}

// checkLock refuses a lock heartbeat that is not shorter than the lock the
// source's configuration gives its deliveries: the broker would hand a
// message the engine still holds to another consumer (or to this one again)
// whenever a send takes longer, so a slow or unavailable sink turns into
// duplicates, and into spent redelivery budgets (JetStream max_deliver).
func checkLock(e *eval, src Adapter, l bridge.Lock, b *pipelineBlock) {
	if src.Config == nil {
		return
	}
	k := lookupKind(src.Kind)
	if k == nil || k.sourceLock == nil {
		return
	}
	name, d := k.sourceLock(src.Config)
	if d <= 0 || l.ExtendEvery <= d/2 {
		return
	}
	rng := b.Source.DefRange
	if b.Lock != nil && b.Lock.ExtendEvery != nil {
		rng = b.Lock.ExtendEvery.Expr.Range()
	}
	if l.ExtendEvery < d {
		// Accepted, and said: one late extension (a slow broker, a busy
		// machine) and the lock lapses ("at most a third", the error
		// below says, and ack_wait 11s passed with a 10s heartbeat
		// unremarked).
		e.diags = append(e.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Subject: rng.Ptr(),
			Summary: "Lock heartbeat close to the source's lock",
			Detail: fmt.Sprintf("The engine extends the locks of the messages it holds every %s (lock { extend_every }), and the %s source's %s is %s: "+
				"one extension that comes late and the broker redelivers a message the engine still holds. Set lock { extend_every } to at most a third of it (%s), or a longer %s.",
				l.ExtendEvery, src.Kind, name, d, (d / 3).Round(time.Millisecond), name)})
		return
	}
	e.errorf(rng, "Lock heartbeat too slow for the source",
		"The engine extends the locks of the messages it holds every %s (lock { extend_every }), but the %s source's %s is %s: "+
			"the broker would redeliver a message the engine still holds whenever a send takes longer, so a slow or unavailable sink means duplicates. "+
			"Set lock { extend_every } to at most a third of it (%s), or a longer %s.",
		l.ExtendEvery, src.Kind, name, d, (d / 3).Round(time.Millisecond), name)
}

// decodeEngine reads the engine's blocks over the defaults.
func decodeEngine(e *eval, b *pipelineBlock) bridge.Options {
	o := bridge.DefaultOptions()
	if x := b.Ordering; x != nil {
		if e.integer(x.MaxInFlight, 1, maxInFlightLimit, &o.Ordering.MaxInFlight) {
			o.Ordering.MaxInFlightAuto = false
		}
		if e.integer(x.PerGroup, 1, maxInFlightLimit, &o.Ordering.PerGroup) && o.Ordering.PerGroup > o.Ordering.MaxInFlight {
			e.errorf(x.PerGroup.Expr.Range(), "Invalid value", "per_group (%d) cannot exceed max_in_flight (%d).", o.Ordering.PerGroup, o.Ordering.MaxInFlight)
		}
		if e.oneOf(x.Ungrouped, []string{"auto", bridge.UngroupedSource, bridge.UngroupedConcurrent}, &o.Ordering.Ungrouped) && o.Ordering.Ungrouped == "auto" {
			o.Ordering.Ungrouped = bridge.UngroupedAuto
		}
	}
	if x := b.Batch; x != nil {
		e.integer(x.Size, 1, maxBatchSize, &o.Batch.Size)
		e.duration(x.Linger, true, &o.Batch.Linger)
		e.integer(x.Concurrency, 1, maxConcurrency, &o.Batch.Concurrency)
	}
	if x := b.Retry; x != nil {
		r := &o.Retry
		okI := x.Initial == nil || e.duration(x.Initial, false, &r.Initial)
		okM := x.Max == nil || e.duration(x.Max, false, &r.Max)
		switch {
		case okI && okM && x.Max != nil && r.Max < r.Initial:
			e.errorf(x.Max.Expr.Range(), "Invalid duration", "max (%s) cannot be shorter than initial (%s).", r.Max, r.Initial)
		case x.Max == nil && r.Max < r.Initial:
			r.Max = r.Initial // initial above the default max: a flat delay is meant
		}
		e.float(x.Multiplier, 1, 100, &r.Multiplier)
		e.float(x.Jitter, 0, 1, &r.Jitter)
		e.integer(x.MaxAttempts, 0, 1_000_000, &r.MaxAttempts)
		e.duration(x.MaxElapsed, true, &r.MaxElapsed)
	}
	if x := b.Lock; x != nil {
		l := &o.Lock
		okE := x.ExtendEvery == nil || e.duration(x.ExtendEvery, false, &l.ExtendEvery)
		okB := x.ExtendBy == nil || e.duration(x.ExtendBy, false, &l.ExtendBy)
		if okE && okB && l.ExtendBy <= l.ExtendEvery {
			a := x.ExtendBy
			if a == nil {
				a = x.ExtendEvery
			}
			e.errorf(a.Expr.Range(), "Invalid lock settings",
				"extend_by (%s) must be longer than extend_every (%s), or locks lapse between extensions.", l.ExtendBy, l.ExtendEvery)
		}
	}
	e.duration(b.ShutdownTimeout, false, &o.ShutdownTimeout)
	e.duration(b.StallAfter, false, &o.StallAfter)
	return o
}
