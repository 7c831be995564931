package engine

import (
	"context"

	"github.com/floe-dev/floe/cluster"

	"github.com/floe-dev/floe/engine/internal/owner"
	"github.com/floe-dev/floe/engine/internal/runner"
	"github.com/floe-dev/floe/engine/internal/sinks"
	"github.com/floe-dev/floe/spec"
)

// The run loop, execution, state, sources and sinks live in package
// engine/internal/runner; these are its public names. See the runner's
// declarations for the full documentation of each.

// Options control one run.
type Options = runner.Options

// Progress is a snapshot of a run's progress.
type Progress = runner.Progress

// Result summarises a run.
type Result = runner.Result

// DroppedState is one operator's state a reset dropped.
type DroppedState = runner.DroppedState

// StateMigration is one registered step that converts an operator's state
// from one state format version to another (Options.Migrations).
type StateMigration = runner.StateMigration

// RequestStats counts object-store requests (see store.RetryStats).
type RequestStats = runner.RequestStats

// Requests counts object-store requests as the store bills them.
type Requests = runner.Requests

// Store is the object-store interface, for Options.WrapStore.
type Store = runner.Store

// ErrFenced is returned when another writer committed an epoch this run was
// about to commit.
var ErrFenced = runner.ErrFenced

// ErrSuperseded is returned when this run's epoch committed but another
// writer moved the head past it.
var ErrSuperseded = runner.ErrSuperseded

// Errors of a pipeline run by several workers (Options.Workers): a
// barrier's peers did not show up within Options.WorkerTimeout (a
// *cluster.MissingError names them), or another writer committed or
// decided the epoch on another head or generation.
var (
	ErrPeersMissing = cluster.ErrPeersMissing
	ErrWorkerFenced = cluster.ErrFenced
)

// ErrTransient marks a storage failure that may succeed when tried again;
// ErrCommitUnknown and ErrOutcomeUnknown mark a write whose outcome could
// not be read back: the next run resolves it.
var (
	ErrTransient      = runner.ErrTransient
	ErrCommitUnknown  = runner.ErrCommitUnknown
	ErrOutcomeUnknown = runner.ErrOutcomeUnknown
)

// RejectingFraction is the share of an epoch's rows whose rejection makes
// status call a pipeline "rejecting" (and a run warn).
const RejectingFraction = sinks.RejectingFraction

// Run executes the pipeline: epochs until caught up (Trigger == 0), until
// UntilEpoch, or until Stop is closed. A cancelled context aborts the epoch
// in progress (its files become orphans that the next run removes) and
// returns the context's error.
func Run(ctx context.Context, p *spec.Pipeline, opts Options) (*Result, error) {
	return runner.Run(ctx, p, opts)
}

// Redact returns a URL safe to print: no user info, and the values of
// secret-looking query parameters replaced (see store.Redact).
func Redact(rawURL string) string { return runner.Redact(rawURL) }

// PipelineStateURL returns <state-url>/<pipeline>.
func PipelineStateURL(p *spec.Pipeline) (string, error) { return owner.PipelineStateURL(p) }

// Outputs returns the sink-relative paths of every committed output file,
// in commit order, and the sink URL they are relative to.
func Outputs(ctx context.Context, p *spec.Pipeline) ([]string, error) {
	return runner.Outputs(ctx, p)
}

// FormatWatermark renders a watermark in microseconds for people.
func FormatWatermark(wm int64) string { return runner.FormatWatermark(wm) }

// SavepointURL returns the URL of the named savepoint's folder.
func SavepointURL(p *spec.Pipeline, name string) (string, error) {
	return runner.SavepointURL(p, name)
}

// OutputURLs returns the URL of every committed output file, in commit
// order: of every sink, or (sink set) of the named sink only.
func OutputURLs(ctx context.Context, p *spec.Pipeline, sink string) ([]string, error) {
	return runner.OutputURLs(ctx, p, sink)
}

// CheckOutputPath refuses a path a command would write (--out,
// --emit-test, floe run --metrics-file) that lies inside one of p's
// locations; flag names the flag in the error.
func CheckOutputPath(p *spec.Pipeline, flag, path string, dir bool) error {
	return owner.CheckOutputPath(p, flag, path, dir)
}
