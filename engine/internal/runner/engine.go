package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/owner"
	"github.com/floe-dev/floe/engine/internal/sinks"
	"github.com/floe-dev/floe/engine/internal/sources"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/expr"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// Options control one run.
type Options struct {
	// Trigger > 0 keeps running, starting an epoch every Trigger (or at once
	// while a backlog remains); 0 runs until caught up and returns (--once).
	Trigger time.Duration
	// Stop, when closed, ends the run after the epoch in progress commits
	// (a graceful stop; cancelling the context aborts the epoch instead).
	Stop <-chan struct{}
	// Parallelism overrides the spec's state.parallelism when > 0.
	Parallelism int
	// Workers > 1 runs the pipeline in Workers processes together, this
	// one being worker Worker (0..Workers-1), coordinated through the
	// state store only (workers.go, package cluster); WorkerTimeout bounds
	// the wait for the other workers at any barrier (default
	// cluster.DefaultTimeout).
	Workers, Worker int
	WorkerTimeout   time.Duration
	// WorkerTakeOver is how long worker 1 waits for worker 0 to decide or
	// commit an epoch before doing it itself (default
	// cluster.DefaultTakeOver; worker w waits w times as long).
	WorkerTakeOver time.Duration
	// WorkerRun names this run of the workers (--run-id; see
	// cluster.Config.Run).
	WorkerRun string
	// Drain ends the input: after the last file the watermark advances to
	// +inf and every open window is emitted.
	Drain bool
	// UntilEpoch stops after committing this epoch (0: no limit).
	UntilEpoch int64
	// Log receives structured logs (nil: discarded).
	Log *slog.Logger
	// Progress, when set, is called after every epoch and while files decode.
	Progress func(Progress)
	// Now is the clock for idle timeouts (nil: time.Now).
	Now func() time.Time
	// Retry configures store retries (zero: defaults).
	Retry store.RetryPolicy
	// Functions are user-defined scalar functions (Go funcs registered with
	// expr.Functions.Register) that the pipeline's filter and project
	// expressions may call by name, like the built-in ones.
	Functions *expr.Functions
	// FromSavepoint restores a savepoint (a name under the pipeline's
	// savepoints/, or the URL of a savepoint folder anywhere) into a new
	// generation; Claim lets that generation reference a named savepoint's
	// files instead of copying them.
	FromSavepoint string
	Claim         bool
	// RollbackTo restores a retained epoch into a new generation: the epochs
	// after it are abandoned (their outputs are no longer listed).
	RollbackTo int64
	// ResetState starts a new generation with empty operator state, keeping
	// the source offsets (files already read are not read again).
	ResetState bool
	// Reprocess makes this run read again input files it has read before,
	// in a new generation with the same state: every file rejected whole in
	// the retained epochs (ReprocessRejected) and/or the files whose key or
	// base name matches ReprocessFiles (a path.Match glob).
	ReprocessRejected bool
	ReprocessFiles    string
	// FullList makes a source with order: lexical list the whole source
	// this run, however recent the last full listing (sources.Listing).
	FullList bool
	// Migrations are registered steps between state format versions (see
	// StateMigration); a run whose restored state is in an older format
	// applies the shortest chain of them.
	Migrations []StateMigration
	// WrapStore, when set, wraps every store the run opens ("state",
	// "sink", "source", "late", "rejected"): for fault-injection tests.
	WrapStore func(name string, s store.Store) store.Store
}

// Progress is a snapshot of a run's progress.
type Progress struct {
	Epoch        int64
	FilesDone    int64 // files committed by this run
	FilesPending int64 // files known and not yet committed, including FilesDone
	RowsDone     int64
	Watermark    int64 // microseconds; math.MinInt64 = none
	Started      time.Time
	// Generation, Counters (the pipeline's lifetime totals at the head) and
	// CommittedAt describe the head; Requests counts this run's
	// object-store requests so far.
	Generation  int64
	Counters    manifest.Counters
	CommittedAt time.Time
	Requests    store.RetryStats
	// Waiting is set when a --trigger run is caught up and waits for input.
	Waiting bool
}

// Result summarises a run.
type Result struct {
	Epochs       int   // epochs committed by this run
	FirstEpoch   int64 // first epoch committed by this run (0: none)
	LastEpoch    int64 // head epoch after the run
	Generation   int64
	Files        int64
	Rows         int64
	RowsOut      int64
	RowsLate     int64
	RowsRejected int64
	Watermark    int64
	Outputs      []string // sink-relative output files committed by this run
	// Requests counts the object-store requests of the run, by kind, with
	// retries and timeouts.
	Requests store.RetryStats
	SinkURL  string // every sink's, comma-separated
	StateURL string
	// UntilReached: the head was already at or past Options.UntilEpoch.
	UntilReached bool
	// StateRowsDecoded counts the restored window-state rows this run
	// decoded; StateRowsSkipped those it never needed (restore on demand:
	// key groups without input and without windows due).
	StateRowsDecoded, StateRowsSkipped int64
	// StateDropped (a --reset-state run) is the operator state the reset
	// left behind: state rows in the head's base files per operator, and
	// the delta files on top of them (open windows, join and top-N
	// buffers, dedup keys).
	StateDropped []DroppedState
}

// ErrFenced is returned when another writer committed an epoch this run was
// writing; see epoch.ErrFenced.
var ErrFenced = epoch.ErrFenced

// ErrSuperseded is returned when this run's epoch committed but another
// writer already built on it; see epoch.ErrSuperseded.
var ErrSuperseded = epoch.ErrSuperseded

// ErrTransient marks a storage failure that may succeed when tried again
// (store.ErrTransient); ErrCommitUnknown and ErrOutcomeUnknown mark a write
// whose outcome could not be read back (epoch.ErrCommitUnknown,
// store.ErrOutcomeUnknown): the next run resolves it.
var (
	ErrTransient      = store.ErrTransient
	ErrCommitUnknown  = epoch.ErrCommitUnknown
	ErrOutcomeUnknown = store.ErrOutcomeUnknown
)

// StateMigration is one registered step that converts an operator's state
// from one state format version to another (see Options.Migrations and
// dataflow.StateMigration).
type StateMigration = dataflow.StateMigration

// Redact returns a URL safe to print: no user info, and the values of
// secret-looking query parameters replaced (see store.Redact). The CLI uses
// it for every URL it prints that the engine did not redact already.
func Redact(rawURL string) string { return store.Redact(rawURL) }

// RequestStats counts object-store requests (see store.RetryStats).
type RequestStats = store.RetryStats

// Requests counts object-store requests as the store bills them (see
// store.Requests).
type Requests = store.Requests

// Store is the object-store interface, for Options.WrapStore.
type Store = store.Store

// Stores are the opened stores of one pipeline.
type Stores struct {
	State, Sink, Source store.Store
	Late, Rejected      store.Store   // nil unless late_url / rejected_url
	extra               []store.Store // opened later (graph stages' late_url), closed with the rest
	StateURL            string
	retrying            []*store.Retrying
}

// Requests returns the object-store requests (and retries) of every store
// so far; an epoch's cost is the difference of two calls.
func (s *Stores) Requests() store.RetryStats {
	var t store.RetryStats
	add := func(a *store.OpStats, b store.OpStats) { a.Calls += b.Calls; a.Attempts += b.Attempts }
	for _, r := range s.retrying {
		x := r.Stats()
		add(&t.Get, x.Get)
		add(&t.Put, x.Put)
		add(&t.List, x.List)
		add(&t.Delete, x.Delete)
		t.Requests = t.Requests.Add(x.Requests)
		t.Retries += x.Retries
		t.Timeouts += x.Timeouts
		t.GaveUp += x.GaveUp
		t.Backoff += x.Backoff
	}
	return t
}

func (s *Stores) Close() {
	for _, x := range append([]store.Store{s.State, s.Sink, s.Source, s.Late, s.Rejected}, s.extra...) {
		if x != nil {
			x.Close()
		}
	}
}

// refURL names a file in another store for a manifest: the store URL
// without its query (connection settings such as an endpoint do not belong
// in a reference) joined with the key.
func refURL(base, key string) string {
	if i := strings.IndexByte(base, '?'); i >= 0 {
		base = base[:i]
	}
	return strings.TrimSuffix(base, "/") + "/" + key
}

func OpenStores(ctx context.Context, p *spec.Pipeline, opts *Options, withSource bool) (*Stores, error) {
	st := &Stores{}
	var err error
	if st.StateURL, err = owner.PipelineStateURL(p); err != nil {
		return nil, err
	}
	// Each store the run needs: its name (for WrapStore and messages), the
	// spec field naming it, its URL, where it goes.
	type target struct {
		name, field, url string
		dst              *store.Store
	}
	// open opens one store the run needs, wrapped for retries (and by
	// WrapStore): name is for WrapStore and messages, field the spec field
	// naming it.
	open := func(name, field, url string) (store.Store, error) {
		s, err := store.Open(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		if opts.WrapStore != nil {
			s = opts.WrapStore(name, s)
		}
		policy := opts.Retry
		if policy.Log == nil {
			policy.Log = opts.log().With("store", name)
		}
		rs := store.WithRetry(s, policy)
		st.retrying = append(st.retrying, rs)
		return rs, nil
	}
	sinkField := "sink.url"
	if IsGraph(p) {
		sinkField = "sinks." + p.Sinks[0].Name + ".url"
	}
	targets := []target{{"state", "state.url", st.StateURL, &st.State}, {"sink", sinkField, p.RootSink().URL, &st.Sink}}
	if withSource && IsGraph(p) {
		// The named sources, combined (sources.Mux); the graph form has
		// no pipeline-wide late_url (each stage may have one).
		targets = append(targets, target{"rejected", p.RejectedField(), p.RejectedURL(), &st.Rejected})
		mux, err := sources.OpenGraph(ctx, p, open, opts.log())
		if err != nil {
			st.Close()
			return nil, err
		}
		st.Source = mux
		withSource = false
	}
	if withSource && isKafka(p) {
		// The kafka source is its own store (kafkasrc.go), not retried
		// as object storage is: a fetch has its own deadline.
		ks, err := sources.OpenKafka(&p.Source, opts.log().With("source", "kafka"))
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("source: %w", err)
		}
		st.Source = ks
		targets = append(targets, target{"late", "source.late_url", p.Source.LateURL, &st.Late},
			target{"rejected", "source.rejected_url", p.Source.RejectedURL, &st.Rejected})
		withSource = false
	}
	if withSource {
		targets = append(targets, target{"source", "source.url", p.Source.URL, &st.Source},
			target{"late", "source.late_url", p.Source.LateURL, &st.Late},
			target{"rejected", "source.rejected_url", p.Source.RejectedURL, &st.Rejected})
	}
	for _, t := range targets {
		if t.url == "" {
			continue // optional side stores
		}
		s, err := open(t.name, t.field, t.url)
		if err != nil {
			st.Close()
			return nil, err
		}
		*t.dst = s
	}
	if extras := dataflow.ExtraSinks(p); len(extras) > 0 {
		// Further sinks: reached through the combined sink (sinks.Mux).
		mux := sinks.NewMux(st.Sink)
		st.Sink = mux
		for _, sk := range extras {
			s, err := open("sink", "sinks."+sk.Name+".url", sk.Sink.URL)
			if err != nil {
				st.Close()
				return nil, err
			}
			mux.Add(sk.Name, s)
		}
	}
	return st, nil
}

func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now().UTC()
	}
	return time.Now().UTC()
}

func (o *Options) log() *slog.Logger {
	if o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Log
}

// Run executes the pipeline: epochs until caught up (Trigger == 0), until
// UntilEpoch, or until Stop is closed. A cancelled context aborts the epoch
// in progress (its files become orphans that the next run removes) and
// returns the context's error.
func Run(ctx context.Context, p *spec.Pipeline, opts Options) (*Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	log := opts.log().With("pipeline", p.Name)
	if err := checkWorkers(p, &opts); err != nil {
		return nil, err
	}
	if opts.Workers > 1 {
		log = log.With("worker", opts.Worker)
	}
	if err := sinks.CheckSinks(p); err != nil {
		return nil, err
	}
	if err := checkLocalSource(p); err != nil {
		return nil, err
	}
	if err := owner.CheckLocations(p); err != nil {
		return nil, err
	}
	if opts.UntilEpoch < 0 {
		return nil, fmt.Errorf("until-epoch %d: must be a positive epoch number", opts.UntilEpoch)
	}
	st, err := OpenStores(ctx, p, &opts, true)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	r, err := newRunner(p, st, &opts, log)
	if err != nil {
		return nil, err
	}
	return r.run(ctx)
}

// checkLocalSource refuses a local source directory that does not exist: a
// typo in source.url would otherwise look like a pipeline with nothing new,
// forever. (An empty S3 prefix is normal and is not checked.)
func checkLocalSource(p *spec.Pipeline) error {
	if IsGraph(p) {
		for _, ns := range p.Sources {
			if err := checkLocalSource(&spec.Pipeline{Source: ns.Source}); err != nil {
				return fmt.Errorf("sources.%s: %w", ns.Name, err)
			}
		}
		return nil
	}
	u, err := url.Parse(p.Source.URL)
	if err != nil || u.Scheme != "file" {
		return nil
	}
	fi, err := os.Stat(u.Path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("source.url: directory %s does not exist", u.Path)
	case err != nil:
		return fmt.Errorf("source.url: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("source.url: %s is a file; give the directory files land in", u.Path)
	}
	return nil
}

// DroppedState is one operator's state a reset dropped.
type DroppedState struct {
	Operator   string `json:"operator"`
	BaseRows   int64  `json:"base_rows"`
	DeltaFiles int    `json:"delta_files"`
}

// droppedState lists the operator state of m.
func droppedState(m *manifest.Manifest) []DroppedState {
	var out []DroppedState
	for _, op := range m.Operators {
		d := DroppedState{Operator: op.ID, DeltaFiles: len(op.Deltas)}
		for _, f := range op.Files {
			d.BaseRows += f.Rows
		}
		out = append(out, d)
	}
	return out
}

// Outputs returns the sink-relative paths of every committed output file,
// in commit order, and the sink URL they are relative to.
func Outputs(ctx context.Context, p *spec.Pipeline) ([]string, error) {
	st, c, head, err := OpenHead(ctx, p)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if head.Manifest == nil {
		return nil, nil
	}
	log := NewOutputLog()
	if err := log.Load(ctx, c, nil, head.Manifest.OutputLog); err != nil {
		return nil, err
	}
	return log.Entries(), nil
}

// ExprOptions are the expression compilers' options of a run.
func (o *Options) ExprOptions() []expr.Option {
	if o == nil || o.Functions == nil {
		return nil
	}
	return []expr.Option{expr.WithFunctions(o.Functions)}
}
