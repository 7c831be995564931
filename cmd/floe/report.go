package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/spec"
)

// Exit codes. Cron (or a Kubernetes Job's backoff policy) can act on them:
// 3 means another writer of the same pipeline is running, not a failure.
const (
	exitOK      = 0 // success: caught up, stopped cleanly, no damage found
	exitFinding = 1 // verify/status/plan found something (damage, incompatible plan)
	exitFailed  = 2 // could not run: bad spec, storage error, ...
	exitFenced  = 3 // fenced or superseded by another writer of the pipeline
)

// exitCode returns the process exit code for err (nil: exitOK).
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, engine.ErrFenced), errors.Is(err, engine.ErrSuperseded), errors.Is(err, engine.ErrWorkerFenced):
		return exitFenced
	}
	return exitFailed
}

// runReport prints what a run committed and returns the error the command
// ends with. On success the summary is the closing lines on stdout. On a
// failure (or an abort) of a run that committed epochs, the summary goes to
// stderr before the one-line reason and says what this run committed before
// it stopped: the next run continues from there. A run that committed
// nothing prints the reason first: nothing at all more when it failed
// before it knew the head (an invalid spec, a plan that does not compile,
// an unreachable store), else one line after the reason naming the head the
// next run continues from.
func runReport(stdout, stderr io.Writer, p *spec.Pipeline, specPath string, untilEpoch int64, res *engine.Result, runErr error) error {
	if runErr != nil {
		switch {
		case res != nil && errors.Is(runErr, engine.ErrSuperseded):
			// The epoch being committed is on the chain, but another writer
			// has gone past it: the reason below names it.
			fmt.Fprintf(stderr, "pipeline %s: another writer committed on top of this run's last epoch; before it, this run finished %d epochs (%d files, %d rows in, %d rows out)\n",
				p.Name, res.Epochs, res.Files, res.Rows+res.RowsRejected, res.RowsOut)
		case res == nil || res.Epochs == 0 && res.LastEpoch == 0:
			// (LastEpoch 0: nothing committed, or the run failed before it
			// read the head.) The reason is all there is to say.
		case res.Epochs == 0:
			return &afterError{err: runErr, after: fmt.Sprintf("pipeline %s: this run committed nothing; the head is still epoch %d, where the next run continues", p.Name, res.LastEpoch)}
		default:
			fmt.Fprintf(stderr, "pipeline %s: before stopping, this run committed epochs %d..%d: %d files, %d rows in (%d rejected), %d rows out, %d late; the next run continues from epoch %d\n",
				p.Name, res.FirstEpoch, res.LastEpoch, res.Files, res.Rows+res.RowsRejected, res.RowsRejected, res.RowsOut, res.RowsLate, res.LastEpoch)
		}
		return runErr
	}
	switch {
	case res.Epochs == 0 && res.UntilReached:
		fmt.Fprintf(stdout, "nothing to do: pipeline %s is already at epoch %d (--until-epoch %d)\n", p.Name, res.LastEpoch, untilEpoch)
	case res.Epochs == 0:
		fmt.Fprintf(stdout, "nothing new: pipeline %s is caught up at epoch %d (watermark %s)\n",
			p.Name, res.LastEpoch, engine.FormatWatermark(res.Watermark))
	default:
		fmt.Fprintf(stdout, "committed epochs %d..%d of pipeline %s: %d files, %d rows in (%d rejected), %d rows out, %d late; watermark %s\n",
			res.FirstEpoch, res.LastEpoch, p.Name, res.Files, res.Rows+res.RowsRejected, res.RowsRejected, res.RowsOut, res.RowsLate,
			engine.FormatWatermark(res.Watermark))
		if in := res.Rows + res.RowsRejected; in > 0 && float64(res.RowsRejected) >= engine.RejectingFraction*float64(in) {
			fmt.Fprintf(stderr, "warning: this run rejected %.0f%% of its rows (%d of %d): a declared type that does not match the files? floe status says where the reasons are\n",
				100*float64(res.RowsRejected)/float64(in), res.RowsRejected, in)
		}
	}
	fmt.Fprintf(stdout, "outputs: %s (committed files: floe outputs %s)\nstate:   %s\n", res.SinkURL, specPath, res.StateURL)
	for _, d := range res.StateDropped {
		fmt.Fprintf(stdout, "reset: dropped the state of operator %s (%d rows in its base files, %d delta files on top)\n", d.Operator, d.BaseRows, d.DeltaFiles)
	}
	if res.StateRowsSkipped > 0 {
		fmt.Fprintf(stdout, "restored on demand: %d of %d state rows decoded (the key groups this run touched or had windows due)\n",
			res.StateRowsDecoded, res.StateRowsDecoded+res.StateRowsSkipped)
	}
	return nil
}

// afterError is an error with a line to print after its reason.
type afterError struct {
	err   error
	after string
}

func (e *afterError) Error() string { return e.err.Error() }
func (e *afterError) Unwrap() error { return e.err }

// runUI is what a run shows and writes besides its summary: the progress
// line on a terminal and the metrics file.
type runUI struct {
	progress *progressLine
	metrics  *runMetrics
}

// onProgress is the engine's Progress callback (nil when there is nothing
// to show).
func (u *runUI) onProgress() func(engine.Progress) {
	if u.progress == nil && u.metrics == nil {
		return nil
	}
	return func(pr engine.Progress) {
		if u.progress != nil {
			u.progress.update(pr)
		}
		if u.metrics != nil {
			u.metrics.observe(pr)
		}
	}
}

func (u *runUI) start(ctx context.Context) {
	if u.metrics != nil {
		u.metrics.start(ctx)
	}
	if u.progress != nil && u.progress.trigger > 0 {
		u.progress.startTicker()
	}
}

func (u *runUI) finish(res *engine.Result, err error) {
	if u.progress != nil {
		u.progress.finish()
	}
	if u.metrics != nil {
		u.metrics.finish(context.Background(), res, exitCode(err))
		u.metrics.stopServing()
	}
}

func statusCmd(stdout io.Writer) *cobra.Command {
	var (
		asJSON   bool
		maxLists int64
	)
	cmd := &cobra.Command{
		Use:   "status SPEC.yaml",
		Short: "print the pipeline's health, then its committed head, lag, state size and counters (reads only; exit 1 when damaged)",
		Long: `status reads the committed head (writing nothing), the retained manifests and the
source listing. The first line is the health: healthy, behind by N files, drained,
drained with input that arrived after the drain, damaged (the pointer names a manifest
that is missing or corrupt: exit 1), or unknown (the source cannot be listed).
It also shows how the next run lists the source (in full, or after the listing
frontier with source.order: lexical), how many keys and requests that listing takes,
and how many processed files a run holds; it warns when the listing takes more than
--max-list-requests requests.
--json prints the same fields; times are RFC 3339, durations (_s) in seconds.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			st, err := engine.ReadStatusWith(cmd.Context(), p, engine.StatusOptions{MaxListRequests: maxLists})
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(stdout, st); err != nil {
					return err
				}
			} else {
				st.Print(stdout)
			}
			if st.State == engine.HealthDamaged {
				return &exitError{code: exitFinding, err: errors.New(st.Health)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "machine-readable output")
	cmd.Flags().Int64Var(&maxLists, "max-list-requests", engine.DefaultMaxListRequests, "warn when listing the source takes more requests than this (S3: 1,000 keys each)")
	return cmd
}

func historyCmd(stdout io.Writer) *cobra.Command {
	var (
		asJSON bool
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "history SPEC.yaml",
		Short: "print one line per retained epoch, newest first: rows, bytes written and object-store requests it cost",
		Long: `history reads the retained manifests (writing nothing) and prints, newest first, each
epoch's generation, number, commit time, duration, input files, rows in / out / late /
rejected, output files, bytes written (outputs, side outputs, state, logs), and the
object-store requests it made before its commit (GET, PUT, LIST, DELETE) with the
retries among them. "-" marks a figure the manifest does not record (epochs written by
an older floe; rows of the oldest retained epoch when its parent was removed).
Only the head's lineage is listed: after a rollback (or a savepoint restore) the epochs
it abandoned are not, each epoch's rows are differences against its predecessor on the
lineage, and the restoring epoch says which epoch it continues.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return fmt.Errorf("--limit %d: must be at least 0", limit)
			}
			p, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			recs, err := engine.History(cmd.Context(), p, limit)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, recs)
			}
			if len(recs) == 0 {
				fmt.Fprintf(stdout, "pipeline %s: nothing committed yet\n", p.Name)
				return nil
			}
			engine.PrintHistory(stdout, recs)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "machine-readable output (a JSON array)")
	f.IntVar(&limit, "limit", 0, "show at most the N newest epochs (0: every retained epoch)")
	f.IntVar(&limit, "last", 0, "same as --limit")
	return cmd
}

// testWrapStore, when set by a test, wraps every store a run opens (see
// engine.Options.WrapStore): a second writer can be made to commit at an
// exact point of a run.
var testWrapStore func(name string, s engine.Store) engine.Store
