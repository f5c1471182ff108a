// Package config reads qbridge's HCL configuration: one file or a directory
// of *.hcl files, checked completely before anything starts. Every problem is
// an hcl.Diagnostic with its file, line and column.
//
//	log {
//	  level  = "info"
//	  format = "json"
//	}
//	http { listen = "127.0.0.1:9464" }
//	pipeline "orders" {
//	  source "sqs" { ... }
//	  sink "nats" { ... }
//	  mapping { ... }      # and ordering, batch, retry, lock, dead_letter
//	  shutdown_timeout = "30s"
//	}
//
// docs/config.md describes every field.
package config

import (
	"log/slog"

	"github.com/hashicorp/hcl/v2"

	"github.com/qbridge/qbridge/bridge"
	"github.com/qbridge/qbridge/mapping"
	"github.com/qbridge/qbridge/mapping/rules"
)

// DefaultListen is the monitoring address unless http.listen says otherwise:
// loopback only.
const DefaultListen = "127.0.0.1:9464"

// Config is a loaded, validated configuration.
type Config struct {
	Log       Log
	HTTP      HTTP
	Pipelines []*Pipeline // in file order, files in name order
}

// Log is the log block.
type Log struct {
	Level  slog.Level
	Format string // "text" or "json"
}

// HTTP is the http block.
type HTTP struct {
	Listen string
}

// Pipeline is one pipeline block.
type Pipeline struct {
	Name string
	// Spec is everything that defines the pipeline's behaviour. It holds
	// plain values only: two loads of an unchanged pipeline give Specs that
	// are reflect.DeepEqual, which is how a reload decides what to restart.
	Spec Spec
	// DefRange is where the pipeline block is, for messages.
	DefRange hcl.Range
	// Readiness says whether the pipeline's outage makes the process
	// unready (/readyz 503): ReadinessRequired or ReadinessIgnored. It is
	// not part of Spec: changing it restarts nothing.
	Readiness string
}

// The values of a pipeline's readiness attribute.
const (
	// ReadinessRequired: the process is ready only while this pipeline is
	// (the default; right for a pipeline service behind a Service).
	ReadinessRequired = "required"
	// ReadinessIgnored: /readyz shows the pipeline's state but stays 200
	// (right for a sidecar, whose pod serves the app even when the bridge
	// waits for a broker).
	ReadinessIgnored = "ignored"
)

// Spec is a pipeline's definition.
type Spec struct {
	Source     Adapter
	Sink       Adapter
	DeadLetter DeadLetter
	Mapping    Mapping
	Engine     bridge.Options
}

// Adapter is a decoded and validated adapter block.
type Adapter struct {
	Kind   string
	Config any // the adapter's SourceConfig or SinkConfig value
}

// DeadLetter is the dead_letter block; the zero value means none.
type DeadLetter struct {
	Native bool
	Sink   *Adapter
}

// Mapping is the mapping block.
type Mapping struct {
	Policy         mapping.Policy
	CarrySource    bool
	MaxMessageSize int
	// Envelope: auto (the default) writes the carry envelope where
	// something needs carrying and sheds it where it does not fit; off
	// never writes it.
	Envelope mapping.EnvelopeMode
	Rules    rules.Spec
}

// options are the encoder options the pipeline's sinks get.
func (m Mapping) options() mapping.Options {
	return mapping.Options{Policy: m.Policy, MaxMessageSize: m.MaxMessageSize, CarrySource: m.CarrySource, Envelope: m.Envelope}
}

// deadLetterOptions are the options of a dead-letter sink: Encode, so that
// the added DeadLetter* attributes never make a message unsendable, and the
// source facts carried along for whoever inspects the dead letter.
func deadLetterOptions() mapping.Options {
	return mapping.Options{Policy: mapping.Encode, CarrySource: true}
}
