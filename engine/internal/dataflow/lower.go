package dataflow

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/expr"
	"github.com/floe-dev/floe/spec"
)

// Lowering the linear form onto the graph executor.
//
// A linear pipeline (source, operators, sink) is the graph of one source,
// a chain of stages and one sink (spec.Pipeline.Graph). CompileLinear
// compiles it as that graph, so it runs on the one executor of graph
// pipelines, while everything it has committed stays what it was: the plan
// hash and the stateful operators' plans are the linear form's (its
// identity does not change with the executor), its source's files keep
// their own keys, the window's state keeps its layout and keys (op=<id>),
// its late rows go to source.late_url under the same names, and its
// outputs are split as before (one file per subtask after a window).
//
// The linear executor this replaced was held to the same manifests, state
// files and output bytes as this lowering by a differential test over
// linear specs at several parallelisms, a rescale and crashes, before it
// was deleted; the compat fixtures (testdata/compat, linearcompat_test.go)
// keep holding the lowering to what earlier releases committed.

// CompileLinear compiles the linear pipeline p over the source schema src
// as a graph: the linear plan first (its errors name the linear fields, and
// it decides the plan's identity and the pruned source columns), then the
// graph over the pruned source.
func CompileLinear(p *spec.Pipeline, src *arrow.Schema, xo ...expr.Option) (*Plan, error) {
	lin, err := Compile(p, src, xo...)
	if err != nil {
		return nil, err
	}
	g, err := p.Graph()
	if err != nil {
		return nil, err
	}
	pl, err := CompileGraph(p, map[string]*arrow.Schema{g.Sources[0].Name: lin.Source}, nil, xo...)
	if err != nil {
		return nil, fmt.Errorf("internal error: the linear plan does not lower onto a graph: %w", err)
	}
	pl.Graph.Linear = true
	pl.Hash, pl.Declared, pl.Ops = lin.Hash, lin.Declared, lin.Ops
	return pl, nil
}
