package owner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// Pipeline identity: what a pipeline is (its sink location and format, its
// side-output locations, the state location that owns the sink, an id) is
// recorded in every generation it starts and in the sink's marker, and every
// run checks the spec against both before it writes anything.

// IdentityPlan is the identity check's verdict.
type IdentityPlan struct {
	Want     manifest.Identity  // what the spec says (ID: the recorded one, or new)
	recorded *manifest.Identity // in the head's generation; nil if none
	markers  []sinkMarker       // one per sink: the root sink's first
	Refusal  error              // non-nil: the run must not write anything
	Warnings []string
	// restoring: the run restores a savepoint, an explicit move of the
	// pipeline, which takes its sinks over from the state their markers
	// name.
	restoring bool
	claimed   bool // claimSink made the markers name this run's state
}

// sinkMarker is one sink's marker as the run found it.
type sinkMarker struct {
	key    string // in the combined sink: the root's marker, or "@<name>/" + it
	url    string // the sink's location (identityOf)
	marker *manifest.SinkMarker
	tag    string
	// takeover, when set, says why this run's claim rewrites the marker
	// to name its own state (the marker names another state of this
	// pipeline, which loses the sink).
	takeover string
}

// One state owns a sink: the one its marker names. A run whose state is
// another, with the same pipeline id (a copy of the state, or a savepoint
// of it restored elsewhere), takes the sink over (claimSink rewrites the
// marker with If-Match) when it restores a savepoint, or when the marker
// names the state location this state's head generation was recorded at
// (this state is a copy of the owner: a move). Any other run is refused
// before it writes anything, in particular the old state's runs after a
// takeover: their cleanup would delete the new owner's outputs as
// orphans. A run checks again before it cleans the sinks at its start and
// end and before each epoch writes (checkOwner), so one that was running
// during a takeover stops too (a --trigger worker of the old state).

// PlanIdentity reads the sink marker and decides. It writes nothing.
// restoring: the run restores a savepoint (it may take the sinks over).
func PlanIdentity(ctx context.Context, p *spec.Pipeline, stateURL string, sink store.Store, c *epoch.Committer, head *epoch.Head, from *manifest.Generation, restoring bool) (*IdentityPlan, error) {
	ip := &IdentityPlan{Want: manifest.Identity{
		State: IdentityOf(stateURL), Sink: IdentityOf(p.RootSink().URL), SinkFormat: string(p.RootSink().Format),
		Late: IdentityOf(p.Source.LateURL), Rejected: IdentityOf(p.RejectedURL()),
	}, restoring: restoring}
	ip.markers = []sinkMarker{{key: manifest.SinkMarkerName, url: ip.Want.Sink}}
	for _, sk := range dataflow.ExtraSinks(p) {
		ip.Want.Sinks = append(ip.Want.Sinks, manifest.SinkIdentity{Name: sk.Name, URL: IdentityOf(sk.Sink.URL), Format: string(sk.Sink.Format)})
		ip.markers = append(ip.markers, sinkMarker{key: ExtraSinkDir(sk.Name) + "/" + manifest.SinkMarkerName, url: IdentityOf(sk.Sink.URL)})
	}
	g := head.Generation
	if g == nil || g.Identity == nil {
		g = from // restoring a savepoint into an empty state: its identity
	}
	if g != nil && g.Identity != nil {
		ip.recorded = g.Identity
		ip.Want.ID = g.Identity.ID
	} else {
		ip.Want.ID = uuid.NewString()
	}
	// The markers are read before the next generation: a run starts its
	// generation before it claims the sinks, so a marker seen here whose
	// generation has not committed yet (another worker's first epoch in
	// flight, or a crash before it) has its generation record in place
	// when that is read below. Read the other way round, a worker starting
	// between the two saw the marker without the generation and refused
	// the sink as another pipeline's.
	for i := range ip.markers {
		m := &ip.markers[i]
		data, tag, err := sink.Get(ctx, m.key)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("sink %s: read %s: %w", m.url, manifest.SinkMarkerName, err)
		default:
			if m.marker, err = manifest.DecodeSinkMarker(manifest.SinkMarkerName, data); err != nil {
				return nil, fmt.Errorf("sink %s: %w", m.url, err)
			}
			m.tag = tag
		}
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
	case next.Identity != nil && next.Identity.SameExceptID(&ip.Want) && (ip.recorded == nil || next.Identity.ID == ip.recorded.ID):
		ip.Want.ID = next.Identity.ID
	}
	ip.Refusal = ip.check(p.Name, head)
	return ip, nil
}

// check compares the spec with the recorded identity and the marker.
func (ip *IdentityPlan) check(name string, head *epoch.Head) error {
	want, rec, mk := &ip.Want, ip.recorded, ip.markers[0].marker
	const fix = "revert the spec, or pick a new pipeline name and a new sink to start over"
	if rec != nil {
		if err := ip.checkSinks(head); err != nil {
			return err
		}
		for _, c := range []struct{ field, old, new string }{
			{"sink.url", rec.Sink, want.Sink}, {"sink.format", rec.SinkFormat, want.SinkFormat},
			{"source.late_url", rec.Late, want.Late}, {"source.rejected_url", rec.Rejected, want.Rejected},
		} {
			if c.old != c.new && c.field == "sink.url" && mk != nil && !mk.Legacy && mk.ID == rec.ID {
				// The sink was copied with its marker (a bucket migration
				// that moved state and sink together): it is this
				// pipeline's.
				ip.Warnings = append(ip.Warnings, fmt.Sprintf("sink moved: %s → %s (its marker names this pipeline)", c.old, c.new))
				continue
			}
			if c.old != c.new {
				hint := ""
				if c.field == "sink.url" {
					hint = movedHint
				}
				return fmt.Errorf("%s changed: %s → %s, but %s with the old value; %s",
					c.field, orNone(c.old), orNone(c.new), committedWith(head), fix+hint)
			}
		}
	}
	for i := range ip.markers {
		if err := ip.checkMarker(name, head, &ip.markers[i], i == 0); err != nil {
			return err
		}
	}
	return nil
}

// checkMarker checks one sink's marker: the sink must be this pipeline's or
// nobody's.
func (ip *IdentityPlan) checkMarker(name string, head *epoch.Head, m *sinkMarker, root bool) error {
	want, mk := &ip.Want, m.marker
	if mk == nil {
		return nil
	}
	if mk.Pipeline != name {
		return fmt.Errorf("sink %s belongs to another pipeline (%s names %q); give each pipeline its own sink url",
			m.url, manifest.SinkMarkerName, mk.Pipeline)
	}
	switch {
	case mk.Legacy && head.Manifest != nil && root:
		return nil // written by an older release for this pipeline: upgraded on claim
	case !mk.Legacy && mk.ID == want.ID && mk.State == want.State:
		return nil
	case !mk.Legacy && mk.ID == want.ID:
		switch {
		case ip.restoring:
			m.takeover = "restoring a savepoint"
		case ip.recorded != nil && ip.recorded.State == mk.State:
			m.takeover = "state moved: this state's generation was recorded at " + mk.State
		default:
			return fmt.Errorf("sink %s is owned by state %s (its %s names it: a restore or a move of the pipeline's state took the sink over there); "+
				"state %s no longer owns it, and its run would delete the new owner's outputs: set state.url to %s to run the pipeline there, "+
				"or move it back by restoring a savepoint of that state (floe run --from-savepoint URL)",
				m.url, mk.State, manifest.SinkMarkerName, want.State, strings.TrimSuffix(mk.State, "/"+name))
		}
		ip.Warnings = append(ip.Warnings, fmt.Sprintf("sink %s: taking it over from state %s (%s); runs with state %s are refused from now on",
			m.url, mk.State, m.takeover, mk.State))
		return nil
	}
	owner := "state " + mk.State
	if mk.Legacy {
		owner = "its state, written by an older floe release"
	}
	return fmt.Errorf("sink %s belongs to another pipeline: it holds outputs of pipeline %q (%s), and state %s has no record of them; "+
		"if that state was deleted on purpose, give the pipeline a new sink url (or empty this one); if it moved, point state.url at it",
		m.url, mk.Pipeline, owner, want.State)
}

// checkSinks compares the further sinks with the recorded ones: a sink that
// committed outputs keeps its name, location and format (its outputs are
// listed under its name), and the first sink stays first; a new sink may
// be added (it receives the outputs of the epochs from now on).
func (ip *IdentityPlan) checkSinks(head *epoch.Head) error {
	want, rec := &ip.Want, ip.recorded
	const fix = "revert the spec, or pick a new pipeline name and new sinks to start over"
	if rec.Sink != want.Sink {
		for _, w := range want.Sinks {
			if w.URL == rec.Sink {
				return fmt.Errorf("sinks.%s: %s was the pipeline's first sink when epochs up to %d were committed (their outputs are listed relative to it); list it first again",
					w.Name, w.URL, head.Epoch())
			}
		}
	}
	for _, r := range rec.Sinks {
		i := slices.IndexFunc(want.Sinks, func(w manifest.SinkIdentity) bool { return w.Name == r.Name })
		switch {
		case i < 0 && r.URL == want.Sink:
			return fmt.Errorf("sinks: %s (sink %s) must stay after the first sink, as when epochs up to %d were committed (their outputs are listed as @%s/...); list %s first again",
				r.URL, r.Name, head.Epoch(), r.Name, rec.Sink)
		case i < 0:
			return fmt.Errorf("sinks.%s removed, but epochs up to %d committed outputs to it (%s); %s", r.Name, head.Epoch(), r.URL, fix)
		case want.Sinks[i].URL != r.URL && ip.copiedWithMarker(want.Sinks[i].URL, rec.ID):
			// Copied with its marker, as the first sink may be (check): a
			// move of the whole pipeline.
			ip.Warnings = append(ip.Warnings, fmt.Sprintf("sink %s moved: %s → %s (its marker names this pipeline)", r.Name, r.URL, want.Sinks[i].URL))
		case want.Sinks[i].URL != r.URL:
			return fmt.Errorf("sinks.%s.url changed: %s → %s, but %s with the old value; %s", r.Name, r.URL, want.Sinks[i].URL, committedWith(head), fix+movedHint)
		case want.Sinks[i].Format != r.Format:
			return fmt.Errorf("sinks.%s.format changed: %s → %s, but epochs up to %d were committed with the old value; %s", r.Name, r.Format, want.Sinks[i].Format, head.Epoch(), fix)
		}
	}
	for _, w := range want.Sinks {
		if !slices.ContainsFunc(rec.Sinks, func(r manifest.SinkIdentity) bool { return r.Name == w.Name }) {
			ip.Warnings = append(ip.Warnings, fmt.Sprintf("sink %s added (%s): it receives the outputs of epochs after %d", w.Name, w.URL, head.Epoch()))
		}
	}
	return nil
}

// movedHint says how a sink is moved, for the refusal of a changed sink url.
const movedHint = "; to move a sink, copy its files with its " + manifest.SinkMarkerName + " to the new location first (README: Moving a pipeline)"

// committedWith says which epochs were committed under the recorded
// identity: the head's, or (restoring a savepoint into an empty state)
// the savepoint's.
func committedWith(head *epoch.Head) string {
	if head.Epoch() == 0 {
		return "the restored savepoint's epochs were committed"
	}
	return fmt.Sprintf("epochs up to %d were committed", head.Epoch())
}

// copiedWithMarker reports whether the sink at url holds a marker of the
// pipeline id: it was copied with the pipeline's other files.
func (ip *IdentityPlan) copiedWithMarker(url, id string) bool {
	for _, m := range ip.markers {
		if m.url == url && m.marker != nil && !m.marker.Legacy && m.marker.ID == id {
			return true
		}
	}
	return false
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// ClaimSink creates each sink's marker, or upgrades a legacy one, for the
// identity id (the generation's, once it exists). Called only after every
// check of the run passed and the generation is known.
// The marker names the run's state (want.State), which after a move is not
// the one the continued generation recorded. A takeover is logged.
func (ip *IdentityPlan) ClaimSink(ctx context.Context, sink store.Store, name string, id *manifest.Identity, log *slog.Logger) error {
	if id == nil {
		return nil // a legacy generation: the marker stays as it is until the next generation
	}
	ip.claimed = true
	// The generation's id is the one the run writes under: another worker
	// of a pipeline run by several may have created the generation (its
	// id) that this one adopted.
	ip.Want.ID = id.ID
	for _, m := range ip.markers {
		if err := claimMarker(ctx, sink, name, id.ID, ip.Want.State, m); err != nil {
			return err
		}
		if m.takeover != "" {
			log.Warn("sink taken over: its marker now names this run's state; runs with the old state are refused",
				"sink", m.url, "old_state", m.marker.State, "state", ip.Want.State, "reason", m.takeover)
		}
	}
	return nil
}

// TakeoverPending reports whether a sink's marker names another state
// that this run is to take over and has not yet: until its claim the run
// must not clean that sink (its orphans are judged by the owner's log).
func (ip *IdentityPlan) TakeoverPending() bool {
	if ip == nil || ip.claimed {
		return false
	}
	for _, m := range ip.markers {
		if m.takeover != "" {
			return true
		}
	}
	return false
}

func claimMarker(ctx context.Context, sink store.Store, name, id, state string, m sinkMarker) error {
	if m.marker != nil && !m.marker.Legacy && m.marker.ID == id && m.marker.State == state {
		return nil
	}
	mk := &manifest.SinkMarker{FormatVersion: manifest.FormatVersion, Pipeline: name, ID: id, State: state}
	data, err := manifest.EncodeSinkMarker(mk)
	if err != nil {
		return err
	}
	opts := store.PutOptions{IfNotExist: true}
	if m.marker != nil {
		opts = store.PutOptions{IfMatch: m.tag}
	}
	_, err = sink.Put(ctx, m.key, data, opts)
	if err == nil {
		return nil
	}
	if !errors.Is(err, store.ErrPrecondition) {
		return fmt.Errorf("sink %s: write %s: %w", m.url, manifest.SinkMarkerName, err)
	}
	// Lost a race (or an earlier try of ours landed): read back.
	got, _, gerr := sink.Get(ctx, m.key)
	if gerr != nil {
		return fmt.Errorf("sink %s: write %s: %w (and reading it back: %v)", m.url, manifest.SinkMarkerName, err, gerr)
	}
	cur, derr := manifest.DecodeSinkMarker(manifest.SinkMarkerName, got)
	if derr == nil && !cur.Legacy && cur.ID == id && cur.State == state {
		return nil
	}
	return fmt.Errorf("sink %s: another pipeline claimed the sink at the same time (%s changed under this run); run again to see which one owns it", m.url, manifest.SinkMarkerName)
}

// CheckOwner reads each sink's marker again and refuses when it no longer
// names this run's state: another state took the sink over while this run
// was running (a restore of a savepoint elsewhere), so this run must not
// clean the sink, whose other outputs are now the new owner's. A marker
// that is gone is not checked (nobody else claimed the sink).
//
// Before the claim (a run claims its sinks just before its first write),
// a marker is checked against the owner planIdentity read, which must be
// this state; a marker this run is to take over is not checked (the run
// does not clean that sink before its claim: takeoverPending).
func (ip *IdentityPlan) CheckOwner(ctx context.Context, sink store.Store) error {
	if ip == nil || ip.Want.ID == "" {
		return nil
	}
	for _, m := range ip.markers {
		if !ip.claimed && (m.takeover != "" || m.marker == nil || m.marker.Legacy) {
			continue // not claimed yet, and not this state's at plan time either
		}
		data, _, err := sink.Get(ctx, m.key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue
		case err != nil:
			return fmt.Errorf("sink %s: read %s: %w", m.url, manifest.SinkMarkerName, err)
		}
		cur, err := manifest.DecodeSinkMarker(manifest.SinkMarkerName, data)
		if err != nil {
			return fmt.Errorf("sink %s: %w", m.url, err)
		}
		if cur.Legacy || cur.ID != ip.Want.ID || cur.State != ip.Want.State {
			owner := "state " + cur.State
			if cur.ID != ip.Want.ID || cur.Legacy {
				owner = fmt.Sprintf("another pipeline (%q, id %s)", cur.Pipeline, cur.ID)
			}
			return fmt.Errorf("sink %s was taken over by %s while this run was running; the run stops before it writes to or cleans the sink again (its cleanup would delete the new owner's outputs): "+
				"what it committed stays in state %s, whose later runs are refused", m.url, owner, ip.Want.State)
		}
	}
	return nil
}

// IdentityOf is the location a pipeline identity records for a store URL:
// the normalised location without connection settings (the endpoint may
// change, the bucket and prefix may not) or credentials; "" for "".
func IdentityOf(raw string) string {
	if raw == "" {
		return ""
	}
	l, err := store.ParseLocation(raw)
	if err != nil {
		return store.Redact(raw)
	}
	l.Endpoint = ""
	return l.String()
}

// ExtraSinkDir is the output directory of further sink name in the
// pipeline's combined sink: "@<name>".
func ExtraSinkDir(name string) string { return manifest.ExtraSinkPrefix + name }
