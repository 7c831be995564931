package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/owner"
	"github.com/floe-dev/floe/engine/internal/runner"
	"github.com/floe-dev/floe/engine/internal/sinks"
	"github.com/floe-dev/floe/engine/internal/sources"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// ValidateReport is what `floe validate` found: the spec's problems, each
// "file:line:col: field: message" where the spec says where, and what could
// not be checked (the stages against source schemas that are not declared
// and whose files cannot be read, say).
type ValidateReport struct {
	Valid     bool     `json:"valid"`
	Problems  []string `json:"problems,omitempty"`
	Unchecked []string `json:"unchecked,omitempty"`
}

// Validate checks p without running it and without writing anything: the
// spec (fields, graph shape, expressions), its locations, and the compiled
// plan against the sources' schemas (declared, else read from the first
// file of each source, which needs the source to be reachable: when it is
// not, Unchecked says so). An error is returned only when the check itself
// could not run.
func Validate(ctx context.Context, p *spec.Pipeline, opts runner.Options) (*ValidateReport, error) {
	rep := &ValidateReport{}
	problem := func(err error) *ValidateReport {
		for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				rep.Problems = append(rep.Problems, line)
			}
		}
		return rep
	}
	if err := p.Validate(); err != nil {
		return problem(err), nil
	}
	err := sinks.CheckSinks(p)
	if err != nil {
		return problem(err), nil
	}
	if err := owner.CheckLocations(p); err != nil {
		return problem(err), nil
	}
	var (
		src   store.Store
		files []store.ObjectInfo
	)
	if needsSourceFiles(p) {
		st, err := runner.OpenStores(ctx, p, &opts, true)
		if err == nil {
			defer st.Close()
			src = st.Source
			files, err = sources.List(ctx, p, st.Source)
		}
		if err != nil {
			rep.Unchecked = append(rep.Unchecked, fmt.Sprintf("the stages against the schema of sources without a declared schema: %v", oneLine(err.Error())))
			rep.Valid = true
			return rep, nil
		}
	}
	if runner.IsGraph(p) {
		schemas, lookups, err := runner.GraphSchemas(ctx, p, src, files, &opts)
		if err != nil {
			rep.Unchecked = append(rep.Unchecked, fmt.Sprintf("the stages against the sources' and lookup tables' schemas: %v", oneLine(err.Error())))
			rep.Valid = true
			return rep, nil
		}
		if _, err := dataflow.CompileGraph(p, schemas, lookups, opts.ExprOptions()...); err != nil {
			return problem(err), nil
		}
	} else {
		sc, err := dataflow.SourceSchema(p)
		if err != nil {
			return problem(err), nil
		}
		if sc == nil {
			if sc, err = sources.InferSchema(ctx, p, src, files); err != nil {
				rep.Unchecked = append(rep.Unchecked, fmt.Sprintf("the operators against the source's schema: %v", oneLine(err.Error())))
				rep.Valid = true
				return rep, nil
			}
		}
		if _, err := dataflow.CompileLinear(p, sc, opts.ExprOptions()...); err != nil {
			return problem(err), nil
		}
	}
	rep.Valid = true
	return rep, nil
}

// needsSourceFiles reports whether compiling p needs a source's files: a
// source without a declared schema.
func needsSourceFiles(p *spec.Pipeline) bool {
	if runner.IsGraph(p) {
		for _, ns := range p.Sources {
			if len(ns.Source.Schema) == 0 {
				return true
			}
		}
		return false
	}
	return len(p.Source.Schema) == 0
}
