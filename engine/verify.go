package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
)

// VerifyReport is what Verify checked and found.
type VerifyReport struct {
	Head      int64    `json:"head_epoch"`
	Manifests int      `json:"manifests"`
	Files     int      `json:"files"`
	Problems  []string `json:"problems"`
}

// Verify reads, without writing anything, every retained manifest and every
// file they reference (state, source and output-log segments, outputs and
// side outputs in the sink) and checks each file's size and checksum. A
// problem is reported per file; the error is for what could not be checked
// at all.
func Verify(ctx context.Context, p *spec.Pipeline) (*VerifyReport, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	st, err := openStores(ctx, p, &Options{}, false)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	c := epoch.NewCommitter(st.state, st.sink, p.Name, nil)
	head, err := c.Peek(ctx)
	if err != nil {
		if errors.Is(err, manifest.ErrCorrupt) {
			return &VerifyReport{Problems: []string{err.Error()}}, nil
		}
		return nil, err
	}
	rep := &VerifyReport{Head: head.Epoch(), Problems: []string{}}
	keep := p.State.RetainEpochs
	if keep < 1 {
		keep = spec.DefaultRetainEpochs
	}
	chain, err := c.Chain(ctx, head, keep)
	if err != nil {
		rep.Problems = append(rep.Problems, err.Error())
		return rep, nil
	}
	seen := map[string]bool{}
	check := func(read func(context.Context, manifest.FileRef) ([]byte, error), f manifest.FileRef) {
		if seen[f.Path] {
			return // shared by several manifests
		}
		seen[f.Path] = true
		rep.Files++
		if _, err := read(ctx, f); err != nil {
			rep.Problems = append(rep.Problems, err.Error())
		}
	}
	for _, m := range chain {
		rep.Manifests++
		for _, f := range m.StateRefs() {
			check(c.ReadFile, f)
		}
		for _, f := range m.SinkRefs() {
			if strings.Contains(f.Path, "://") {
				continue // a side output in a store of its own
			}
			check(c.ReadOutput, f)
		}
	}
	if len(chain) > 0 && len(chain) < keep && chain[len(chain)-1].Parent != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("the chain ends at epoch %d, whose parent's manifest is missing", chain[len(chain)-1].Epoch))
	}
	return rep, nil
}
