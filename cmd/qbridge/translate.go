package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/wire"
)

func init() {
	register("translate", command{
		Summary: "translate one message between wire forms (JSON on stdin → JSON on stdout)",
		Run:     runTranslate,
	})
}

// translateExample is the worked example of -h.
const translateExample = `
Example: a Service Bus message (MessageId, CorrelationId, an int property)
as an SQS consumer would receive it, then the same without the envelope:

  echo '{"properties":{"messageId":{"type":"string","value":"m-1"},"correlationId":{"type":"string","value":"c-9"}},"applicationProperties":[{"key":"qty","value":{"type":"int","value":3}}],"body":{"data":["aGVsbG8="]}}' |
    qbridge translate -from servicebus -to sqs

  ... | qbridge translate -from servicebus -to sqs -envelope off

The first keeps MessageId and CorrelationId in the qbridge.envelope attribute
(qty is a Number.int); the second sends qty alone and names what it left
out on stderr. See docs/what-consumers-see.md.

`

// maxTranslateInput bounds what translate reads: SQS and Service Bus premium
// allow 1 MiB bodies, and the JSON rendering may base64 them.
const maxTranslateInput = 8 << 20

func runTranslate(_ context.Context, args []string, std stdio) int {
	fs := flag.NewFlagSet("translate", flag.ContinueOnError)
	fs.SetOutput(std.Err)
	from := fs.String("from", "", "wire form of the input: "+strings.Join(wire.Names(), ", "))
	to := fs.String("to", "", "wire form of the output (may equal -from: normalize and check)")
	policy := fs.String("policy", "reject", "what to do when the target cannot take the message as it is: reject, drop or encode")
	maxSize := fs.Int("max-size", 0, "target size limit in bytes (0: the target's default)")
	carry := fs.Bool("carry-source", false, "carry read-only source facts (enqueued time, sequence number, ...) in the qbridge.envelope attribute")
	envelope := fs.String("envelope", "auto", "the qbridge.envelope attribute: auto (written when something needs carrying, shed where it does not fit) or off (never; what it would carry is left out and reported)")
	fs.Usage = func() {
		fmt.Fprintf(std.Err, "usage: qbridge translate -from FORM -to FORM [-policy reject|drop|encode] [-envelope auto|off] < message.json\n\nForms:\n")
		for _, f := range wire.All() {
			fmt.Fprintf(std.Err, "  %-17s %s\n", f.Name, f.Doc)
		}
		fmt.Fprint(std.Err, translateExample)
		fs.PrintDefaults()
	}
	if err := parseArgs(fs, args); err != nil {
		return 2
	}
	if *from == "" || *to == "" || fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	src, err := wire.Lookup(*from)
	if err != nil {
		fmt.Fprintln(std.Err, "qbridge translate: -from:", err)
		return 2
	}
	dst, err := wire.Lookup(*to)
	if err != nil {
		fmt.Fprintln(std.Err, "qbridge translate: -to:", err)
		return 2
	}
	pol, err := mapping.ParsePolicy(*policy)
	if err != nil {
		fmt.Fprintln(std.Err, "qbridge translate: -policy:", err)
		return 2
	}
	env, err := mapping.ParseEnvelopeMode(*envelope)
	if err != nil {
		fmt.Fprintln(std.Err, "qbridge translate: -envelope:", err)
		return 2
	}
	if env == mapping.EnvelopeOff && pol == mapping.Encode {
		fmt.Fprintln(std.Err, "qbridge translate: -policy encode needs the envelope, which -envelope off never writes")
		return 2
	}
	in, err := io.ReadAll(io.LimitReader(std.In, maxTranslateInput+1))
	if err != nil {
		fmt.Fprintln(std.Err, "qbridge translate: reading stdin:", err)
		return 1
	}
	if len(in) > maxTranslateInput {
		fmt.Fprintf(std.Err, "qbridge translate: input larger than %d bytes\n", maxTranslateInput)
		return 1
	}
	m, err := src.Parse(in)
	if err != nil {
		fmt.Fprintf(std.Err, "qbridge translate: input (%s): %v\n", src.Name, err)
		return 1
	}
	opt := mapping.Options{
		Policy:         pol,
		MaxMessageSize: *maxSize,
		CarrySource:    *carry,
		Envelope:       env,
		OnDrop: func(field, reason string) {
			if how, ok := mapping.EncodedReport(reason); ok {
				fmt.Fprintf(std.Err, "qbridge translate: encoded %s: %s\n", field, how)
				return
			}
			fmt.Fprintf(std.Err, "qbridge translate: dropped %s: %s\n", field, reason)
		},
		OnShed: func(fields []string) {
			fmt.Fprintf(std.Err, "qbridge translate: %s shed %s\n", mapping.EnvelopeName, strings.Join(fields, ", "))
		},
	}
	out, err := dst.Render(m, opt)
	if err != nil {
		fmt.Fprintf(std.Err, "qbridge translate: output (%s): %v\n", dst.Name, err)
		return 1
	}
	if _, err := std.Out.Write(append(out, '\n')); err != nil {
		fmt.Fprintln(std.Err, "qbridge translate:", err)
		return 1
	}
	return 0
}
