package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// Pipeline identity: what a pipeline is (its sink location and format, its
// side-output locations, the state location that owns the sink, an id) is
// recorded in every generation it starts and in the sink's marker, and every
// run checks the spec against both before it writes anything.

// identityPlan is the identity check's verdict.
type identityPlan struct {
	want     manifest.Identity    // what the spec says (ID: the recorded one, or new)
	recorded *manifest.Identity   // in the head's generation; nil if none
	marker   *manifest.SinkMarker // the sink's marker, nil if none
	markTag  string
	refusal  error // non-nil: the run must not write anything
	warnings []string
}

// planIdentity reads the sink marker and decides. It writes nothing.
func planIdentity(ctx context.Context, p *spec.Pipeline, st *stores, c *epoch.Committer, head *epoch.Head, from *manifest.Generation) (*identityPlan, error) {
	ip := &identityPlan{want: manifest.Identity{
		State: identityOf(st.stateURL), Sink: identityOf(p.Sink.URL), SinkFormat: string(p.Sink.Format),
		Late: identityOf(p.Source.LateURL), Rejected: identityOf(p.Source.RejectedURL),
	}}
	g := head.Generation
	if g == nil || g.Identity == nil {
		g = from // restoring a savepoint into an empty state: its identity
	}
	if g != nil && g.Identity != nil {
		ip.recorded = g.Identity
		ip.want.ID = g.Identity.ID
	} else {
		ip.want.ID = uuid.NewString()
	}
	// A run that crashed after starting a generation and claiming the sink,
	// before its first commit, left that generation for the next run to
	// adopt: its id is the pipeline's if it names the same places.
	var base int64
	if head.Manifest != nil {
		base = head.Manifest.Generation
	}
	next, err := c.ReadGeneration(ctx, base+1)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, err
	case next.Identity != nil && next.Identity.SameExceptID(&ip.want) && (ip.recorded == nil || next.Identity.ID == ip.recorded.ID):
		ip.want.ID = next.Identity.ID
	}
	data, tag, err := st.sink.Get(ctx, manifest.SinkMarkerName)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("sink %s: read %s: %w", p.Sink.URL, manifest.SinkMarkerName, err)
	default:
		if ip.marker, err = manifest.DecodeSinkMarker(manifest.SinkMarkerName, data); err != nil {
			return nil, fmt.Errorf("sink %s: %w", p.Sink.URL, err)
		}
		ip.markTag = tag
	}
	ip.refusal = ip.check(p.Name, head)
	return ip, nil
}

// check compares the spec with the recorded identity and the marker.
func (ip *identityPlan) check(name string, head *epoch.Head) error {
	want, rec, mk := &ip.want, ip.recorded, ip.marker
	const fix = "revert the spec, or pick a new pipeline name and a new sink to start over"
	if rec != nil {
		for _, c := range []struct{ field, old, new string }{
			{"sink.url", rec.Sink, want.Sink}, {"sink.format", rec.SinkFormat, want.SinkFormat},
			{"source.late_url", rec.Late, want.Late}, {"source.rejected_url", rec.Rejected, want.Rejected},
		} {
			if c.old != c.new && c.field == "sink.url" && mk != nil && !mk.Legacy && mk.ID == rec.ID {
				// The sink was copied with its marker (a bucket migration
				// that moved state and sink together): it is this
				// pipeline's.
				ip.warnings = append(ip.warnings, fmt.Sprintf("sink moved: %s → %s (its marker names this pipeline)", c.old, c.new))
				continue
			}
			if c.old != c.new {
				return fmt.Errorf("%s changed: %s → %s, but epochs up to %d were committed with the old value; %s",
					c.field, orNone(c.old), orNone(c.new), head.Epoch(), fix)
			}
		}
	}
	if mk == nil {
		return nil
	}
	if mk.Pipeline != name {
		return fmt.Errorf("sink %s belongs to another pipeline (%s names %q); give each pipeline its own sink url",
			want.Sink, manifest.SinkMarkerName, mk.Pipeline)
	}
	switch {
	case mk.Legacy && head.Manifest != nil:
		return nil // written by an older release for this pipeline: upgraded on claim
	case !mk.Legacy && mk.ID == want.ID:
		if mk.State != want.State {
			ip.warnings = append(ip.warnings, fmt.Sprintf("state moved: the sink marker names %s, this run uses %s", mk.State, want.State))
		}
		return nil
	}
	owner := "state " + mk.State
	if mk.Legacy {
		owner = "its state, written by an older floe release"
	}
	return fmt.Errorf("sink %s belongs to another pipeline: it holds outputs of pipeline %q (%s), and state %s has no record of them; "+
		"if that state was deleted on purpose, give the pipeline a new sink url (or empty this one); if it moved, point state.url at it",
		want.Sink, mk.Pipeline, owner, want.State)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// claimSink creates the sink marker, or upgrades a legacy one, for the
// identity id (the generation's, once it exists). Called only after every
// check of the run passed and the generation is known.
func (ip *identityPlan) claimSink(ctx context.Context, sink store.Store, name string, id *manifest.Identity) error {
	if id == nil {
		return nil // a legacy generation: the marker stays as it is until the next generation
	}
	if ip.marker != nil && !ip.marker.Legacy && ip.marker.ID == id.ID {
		return nil
	}
	mk := &manifest.SinkMarker{FormatVersion: manifest.FormatVersion, Pipeline: name, ID: id.ID, State: id.State}
	data, err := manifest.EncodeSinkMarker(mk)
	if err != nil {
		return err
	}
	opts := store.PutOptions{IfNotExist: true}
	if ip.marker != nil {
		opts = store.PutOptions{IfMatch: ip.markTag}
	}
	_, err = sink.Put(ctx, manifest.SinkMarkerName, data, opts)
	if err == nil {
		return nil
	}
	if !errors.Is(err, store.ErrPrecondition) {
		return fmt.Errorf("sink: write %s: %w", manifest.SinkMarkerName, err)
	}
	// Lost a race (or an earlier try of ours landed): read back.
	got, _, gerr := sink.Get(ctx, manifest.SinkMarkerName)
	if gerr != nil {
		return fmt.Errorf("sink: write %s: %w (and reading it back: %v)", manifest.SinkMarkerName, err, gerr)
	}
	cur, derr := manifest.DecodeSinkMarker(manifest.SinkMarkerName, got)
	if derr == nil && !cur.Legacy && cur.ID == id.ID {
		return nil
	}
	return fmt.Errorf("sink: another pipeline claimed the sink at the same time (%s changed under this run); run again to see which one owns it", manifest.SinkMarkerName)
}
