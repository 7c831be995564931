package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/floe-dev/floe/engine/internal/runner"
	"github.com/floe-dev/floe/engine/internal/sinks"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// Damage kinds reported by Verify.
const (
	DamageMissing    = "missing"
	DamageSize       = "size mismatch"
	DamageChecksum   = "checksum mismatch"
	DamageUnparsable = "unparsable"
)

// Damage is one damaged object.
type Damage struct {
	Object string `json:"object"` // state-relative key, or sink-relative path
	Kind   string `json:"kind"`   // DamageMissing, DamageSize, DamageChecksum or DamageUnparsable
	Detail string `json:"detail"`
}

// String formats the damage on one line.
func (d Damage) String() string {
	return oneLine(fmt.Sprintf("%s: %s: %s", d.Object, d.Kind, d.Detail))
}

// VerifyReport is what Verify checked and found.
type VerifyReport struct {
	Head      int64    `json:"head_epoch"`
	Manifests int      `json:"manifests"`
	Files     int      `json:"files"`
	Damaged   []Damage `json:"damaged"`
	// Problems is Damaged, one line each.
	Problems []string `json:"problems"`
	// Vanished counts referenced files that were deleted while Verify ran
	// because retention (a concurrent run) removed the epochs referencing
	// them: not damage.
	Vanished int `json:"vanished_during_verify"`
}

func (r *VerifyReport) add(d Damage) {
	r.Damaged = append(r.Damaged, d)
	r.Problems = append(r.Problems, d.String())
}

// Verify reads, without writing anything, every retained manifest and every
// file they reference (state bases and deltas, source and output-log
// segments, outputs and side outputs in the sink) and checks each file's
// size and checksum. Damage (a missing, truncated, altered or unparsable
// object) is reported per object in the report; an error means the check
// could not be done (storage unavailable, permissions), never damage.
func Verify(ctx context.Context, p *spec.Pipeline) (*VerifyReport, error) {
	return VerifyWith(ctx, p, runner.Options{})
}

// VerifyWith is Verify with options (Retry, WrapStore and Log are used).
func VerifyWith(ctx context.Context, p *spec.Pipeline, opts runner.Options) (*VerifyReport, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	err := sinks.CheckSinks(p)
	if err != nil {
		return nil, err
	}
	st, err := runner.OpenStores(ctx, p, &opts, false)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	c := epoch.NewCommitter(st.State, st.Sink, p.Name, nil)
	rep := &VerifyReport{Damaged: []Damage{}, Problems: []string{}}
	head, err := c.Peek(ctx)
	if err != nil {
		if d, ok := classify(manifest.LatestPath, err); ok {
			rep.add(d)
			return rep, nil
		}
		return nil, err
	}
	rep.Head = head.Epoch()
	keep := p.State.RetainEpochs
	if keep < 1 {
		keep = spec.DefaultRetainEpochs
	}
	chain, err := c.Chain(ctx, head, keep)
	if err != nil {
		if d, ok := classify("manifest chain", err); ok {
			rep.add(d)
			return rep, nil
		}
		return nil, err
	}
	// Outputs of epochs a rollback or restore abandoned are no longer
	// committed (the head's output log does not list them) and may be gone.
	outLog := runner.NewOutputLog()
	if head.Manifest != nil {
		if err := outLog.Load(ctx, c, nil, head.Manifest.OutputLog); err != nil {
			if d, ok := classify("output log", err); ok {
				rep.add(d)
				return rep, nil
			}
			return nil, err
		}
	}
	seen := map[string]bool{}
	check := func(m *manifest.Manifest, read func(context.Context, manifest.FileRef) ([]byte, error), f manifest.FileRef) error {
		if seen[f.Path] {
			return nil // shared by several manifests
		}
		seen[f.Path] = true
		rep.Files++
		_, err := read(ctx, f)
		if err == nil {
			return nil
		}
		d, ok := classify(f.Path, err)
		if !ok {
			return fmt.Errorf("verify %s: could not check: %w", f.Path, err)
		}
		if d.Kind == DamageMissing && retiredDuringVerify(ctx, c, m) {
			rep.Vanished++
			return nil
		}
		rep.add(d)
		return nil
	}
	for _, m := range chain {
		rep.Manifests++
		for _, f := range m.StateRefs() {
			if err := check(m, c.ReadFile, f); err != nil {
				return nil, err
			}
		}
		for _, f := range m.SinkRefs() {
			if strings.Contains(f.Path, "://") {
				continue // a side output in a store of its own
			}
			if f.Kind == "" && !outLog.Has(f.Path) {
				continue // an output of an abandoned epoch
			}
			if err := check(m, c.ReadOutput, f); err != nil {
				return nil, err
			}
		}
	}
	if len(chain) > 0 && len(chain) < keep {
		last := chain[len(chain)-1]
		lp, err := c.LineageParent(ctx, last)
		if err != nil {
			return nil, fmt.Errorf("verify: lineage of epoch %d: %w", last.Epoch, err)
		}
		if lp != nil && !retiredDuringVerify(ctx, c, last) {
			rep.add(Damage{Object: lp.ManifestPath(), Kind: DamageMissing,
				Detail: fmt.Sprintf("the chain ends at epoch %d, whose parent's manifest is missing", last.Epoch)})
		}
	}
	// Every file the output log lists is a committed output a reader is
	// told to read (floe outputs): each must exist in its sink, also those
	// of epochs retention no longer keeps.
	if outLog.Len() > 0 {
		objs, err := st.Sink.List(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("verify: list the sink: %w", err)
		}
		present := make(map[string]bool, len(objs))
		for _, o := range objs {
			present[o.Key] = true
		}
		for _, f := range outLog.Entries() {
			if seen[f] {
				continue // checked above with its size and checksum
			}
			rep.Files++
			if !present[f] {
				rep.add(Damage{Object: f, Kind: DamageMissing,
					Detail: "the output log lists this committed output (floe outputs names it to readers), but the sink does not hold it"})
			}
		}
	}
	return rep, nil
}

// classify maps a read error to damage; ok is false for an error that is
// not about the object (storage unavailable): the check could not be done.
func classify(object string, err error) (Damage, bool) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Damage{Object: object, Kind: DamageMissing, Detail: err.Error()}, true
	case !errors.Is(err, manifest.ErrCorrupt):
		return Damage{}, false
	}
	var me *manifest.Error
	if errors.As(err, &me) && me.Name != "" {
		object = me.Name
	}
	msg := err.Error()
	kind := DamageUnparsable
	switch {
	case strings.Contains(msg, "size mismatch"):
		kind = DamageSize
	case strings.Contains(msg, "checksum mismatch"), strings.Contains(msg, "do not match its checksum"):
		kind = DamageChecksum
	}
	return Damage{Object: object, Kind: kind, Detail: msg}, true
}

// retiredDuringVerify reports whether m's manifest is gone now: retention
// of a concurrent run removed it (and so, legitimately, its files) while
// Verify was reading.
func retiredDuringVerify(ctx context.Context, c *epoch.Committer, m *manifest.Manifest) bool {
	_, _, err := c.Store.Get(ctx, manifest.ManifestPath(m.Generation, m.Epoch))
	return errors.Is(err, store.ErrNotFound)
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
