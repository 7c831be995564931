package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/floe-dev/floe/cluster"
	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/decide"
	"github.com/floe-dev/floe/engine/internal/owner"
	"github.com/floe-dev/floe/engine/internal/runner"
	"github.com/floe-dev/floe/engine/internal/sinks"
	"github.com/floe-dev/floe/engine/internal/sources"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/iceberg"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// Health states of a pipeline, as Status.State reports them.
const (
	HealthEmpty     = "empty"             // nothing committed yet
	HealthHealthy   = "healthy"           // caught up: no listed file is waiting
	HealthBehind    = "behind"            // files are listed and not processed yet
	HealthDrained   = "drained"           // the input was ended with --drain
	HealthDamaged   = "damaged"           // the head cannot be read: see floe verify
	HealthLateData  = "drained-new-input" // input arrived after --drain: its rows count as late
	HealthUnknown   = "unknown"           // the source could not be listed
	HealthRejecting = "rejecting"         // the last epoch rejected at least RejectingFraction of its rows
)

// Status describes a pipeline's committed head and its health.
type Status struct {
	Pipeline string `json:"pipeline"`
	StateURL string `json:"state_url"`
	// State is one of the Health* constants; Health says it for people
	// ("behind by 3 files (1.2 MiB)"). Both are set by ReadStatus only.
	State       string `json:"state,omitempty"`
	Health      string `json:"health,omitempty"`
	Committed   bool   `json:"committed"`
	Generation  int64  `json:"generation,omitempty"`
	Epoch       int64  `json:"epoch,omitempty"`
	Parallelism int    `json:"parallelism,omitempty"`
	// Workers is the head generation's worker count when several worker
	// processes run it (floe run --workers); absent for one.
	Workers   int    `json:"workers,omitempty"`
	Watermark string `json:"watermark,omitempty"`
	// WatermarkUS is the watermark in microseconds (ReadStatus only;
	// math.MinInt64: none yet, math.MaxInt64: drained).
	WatermarkUS *int64             `json:"watermark_us,omitempty"`
	Counters    *manifest.Counters `json:"counters,omitempty"`
	FilesSeen   int64              `json:"files_seen"`

	// Health figures (ReadStatus only). Times are RFC 3339, durations in
	// seconds, relative to Now.
	Now                *time.Time `json:"now,omitempty"`
	LastCommit         *time.Time `json:"last_commit,omitempty"`
	LastCommitAgeS     *float64   `json:"last_commit_age_s,omitempty"`
	MaxEventTime       string     `json:"max_event_time,omitempty"`
	WatermarkLagEventS *float64   `json:"watermark_lag_event_s,omitempty"` // newest event time seen - watermark
	WatermarkLagWallS  *float64   `json:"watermark_lag_wall_s,omitempty"`  // now - watermark
	PendingFiles       *int64     `json:"pending_files,omitempty"`
	PendingBytes       *int64     `json:"pending_bytes,omitempty"`
	OldestPending      string     `json:"oldest_pending,omitempty"`
	OldestPendingTime  *time.Time `json:"oldest_pending_time,omitempty"`
	OldestPendingAgeS  *float64   `json:"oldest_pending_age_s,omitempty"`
	ListError          string     `json:"list_error,omitempty"`
	// KafkaLag and KafkaPartitions (a kafka source): the records between
	// the committed offsets and the partitions' high watermarks (now, when
	// the source was listed; else as the head recorded them).
	KafkaLag        *int64         `json:"kafka_lag,omitempty"`
	KafkaPartitions []PartitionLag `json:"kafka_partitions,omitempty"`
	// Listing cost (ReadStatus, unless NoList): how the next run lists the
	// source ("full" or "after <frontier>", source.order: lexical), the
	// keys that listing returns, the requests it took (LIST pages on S3),
	// and the processed-file set a run holds (FilesSeen).
	Listing      string `json:"listing,omitempty"`
	ListedKeys   *int64 `json:"listed_keys,omitempty"`
	ListRequests *int64 `json:"list_requests,omitempty"`
	// ListWarning is set when the listing took more than
	// StatusOptions.MaxListRequests requests.
	ListWarning         string    `json:"list_warning,omitempty"`
	StateBytes          int64     `json:"state_bytes,omitempty"`     // operator state: bases and deltas
	StateRows           int64     `json:"state_rows,omitempty"`      // rows of the base files
	MetadataBytes       int64     `json:"metadata_bytes,omitempty"`  // processed-file and output-log segments
	Operators           []OpState `json:"operators,omitempty"`       // state per operator and subtask
	RetainedEpochs      int       `json:"retained_epochs,omitempty"` // manifests of the head's lineage
	OldestRetainedEpoch int64     `json:"oldest_retained_epoch,omitempty"`
	// RestorableEpochs are the retained epochs of the head's lineage, newest
	// first: what rollback --to-epoch, savepoint create --epoch, state and
	// replay accept. After a rollback they skip the abandoned epochs.
	RestorableEpochs []int64 `json:"restorable_epochs,omitempty"`
	// LastEpoch is what the head epoch cost (nil: not recorded).
	LastEpoch *manifest.EpochStats `json:"last_epoch,omitempty"`
	// Table (iceberg sinks): the epoch published to the table and its
	// current snapshot.
	Table *TableStatus `json:"table,omitempty"`

	rejecting string // the rejecting verdict, when the last epoch rejected much (judge)
}

// TableStatus is an Iceberg sink's state.
type TableStatus struct {
	Location       string `json:"location"`
	PublishedEpoch int64  `json:"published_epoch"`
	SnapshotID     int64  `json:"snapshot_id,omitempty"`
	Snapshots      int    `json:"snapshots"`
	Error          string `json:"error,omitempty"`
}

// OpState is one stateful operator's committed state size.
type OpState struct {
	ID       string         `json:"id"`
	Bytes    int64          `json:"bytes"`
	Rows     int64          `json:"rows"` // rows of the base files
	Subtasks []SubtaskState `json:"subtasks"`
}

// SubtaskState is one subtask's share of an operator's state: its base
// file and the delta files on top of it.
type SubtaskState struct {
	Subtask    int   `json:"subtask"`
	KeyGroupLo int   `json:"kg_lo"`
	KeyGroupHi int   `json:"kg_hi"`
	BaseBytes  int64 `json:"base_bytes"`
	BaseRows   int64 `json:"base_rows"`
	Deltas     int   `json:"delta_files"`
	DeltaBytes int64 `json:"delta_bytes"`
}

// Print writes the status as a small table, the health line first.
func (s *Status) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if s.Health != "" {
		fmt.Fprintf(tw, "health\t%s\n", s.Health)
	}
	fmt.Fprintf(tw, "pipeline\t%s\nstate\t%s\n", s.Pipeline, s.StateURL)
	if !s.Committed {
		if s.State != HealthDamaged {
			fmt.Fprintf(tw, "head\tnothing committed yet\n")
		}
		s.printPending(tw)
		tw.Flush()
		return
	}
	if s.LastCommit != nil {
		fmt.Fprintf(tw, "last commit\t%s (%s ago)\n", s.LastCommit.Format(time.RFC3339), fmtAge(*s.LastCommitAgeS))
	}
	if s.Workers > 1 {
		fmt.Fprintf(tw, "head\tgeneration %d, epoch %d, parallelism %d, %d workers\n", s.Generation, s.Epoch, s.Parallelism, s.Workers)
	} else {
		fmt.Fprintf(tw, "head\tgeneration %d, epoch %d, parallelism %d\n", s.Generation, s.Epoch, s.Parallelism)
	}
	wm := s.Watermark
	var lags []string
	if s.WatermarkLagEventS != nil {
		lags = append(lags, fmtAge(*s.WatermarkLagEventS)+" behind the newest event ("+s.MaxEventTime+")")
	}
	if s.WatermarkLagWallS != nil {
		lags = append(lags, fmtAge(*s.WatermarkLagWallS)+" behind the clock")
	}
	if len(lags) > 0 {
		wm += "; " + strings.Join(lags, ", ")
	}
	fmt.Fprintf(tw, "watermark\t%s\n", wm)
	s.printPending(tw)
	if s.RetainedEpochs > 0 {
		fmt.Fprintf(tw, "retained epochs\t%d %s\n", s.RetainedEpochs, formatEpochs(s.RestorableEpochs, s.OldestRetainedEpoch, s.Epoch))
	}
	if e := s.LastEpoch; e != nil {
		fmt.Fprintf(tw, "last epoch\t%.2fs, %d files, %d rows, %s written; %d GET, %d PUT, %d LIST, %d DELETE, %d retries\n",
			float64(e.DurationMs)/1000, e.FilesIn, e.RowsIn, fmtBytes(e.BytesWritten), e.Gets, e.Puts, e.Lists, e.Deletes, e.Retries)
	}
	if t := s.Table; t != nil {
		if t.Error != "" {
			fmt.Fprintf(tw, "iceberg table\t%s: %s\n", t.Location, t.Error)
		} else {
			fmt.Fprintf(tw, "iceberg table\t%s: published through epoch %d, snapshot %d (%d snapshots kept)\n", t.Location, t.PublishedEpoch, t.SnapshotID, t.Snapshots)
		}
	}
	if s.Now != nil {
		fmt.Fprintf(tw, "state size\t%s in %d rows (operators), %s (file and output logs)\n", fmtBytes(s.StateBytes), s.StateRows, fmtBytes(s.MetadataBytes))
		for _, op := range s.Operators {
			for _, st := range op.Subtasks {
				fmt.Fprintf(tw, "  op=%s s=%d\tkey groups [%d, %d): base %s, %d rows; %d deltas, %s\n", op.ID, st.Subtask,
					st.KeyGroupLo, st.KeyGroupHi, fmtBytes(st.BaseBytes), st.BaseRows, st.Deltas, fmtBytes(st.DeltaBytes))
			}
		}
	}
	c := s.Counters
	fmt.Fprintf(tw, "files in\t%d\nrows in\t%d\nrows out\t%d\nrows late\t%d\nrows rejected\t%d\nrows filtered\t%d\nwindows emitted\t%d\n",
		c.FilesIn, c.RowsIn, c.RowsOut, c.RowsLate, c.RowsRejected, c.RowsFiltered, c.Windows)
	tw.Flush()
}

func (s *Status) printPending(tw io.Writer) {
	if s.ListedKeys != nil {
		fmt.Fprintf(tw, "listing\t%s: %d keys in %d requests; %d processed files held\n", s.Listing, *s.ListedKeys, *s.ListRequests, s.FilesSeen)
	}
	if s.ListWarning != "" {
		fmt.Fprintf(tw, "warning\t%s\n", s.ListWarning)
	}
	if s.KafkaLag != nil {
		fmt.Fprintf(tw, "kafka lag\t%d records\n", *s.KafkaLag)
		for _, l := range s.KafkaPartitions {
			fmt.Fprintf(tw, "  %s\tcommitted %d, high %d, lag %d\n", l.Name(), l.Committed, l.High, l.Lag)
		}
	}
	switch {
	case s.ListError != "":
		fmt.Fprintf(tw, "pending\tunknown: %s\n", s.ListError)
	case s.PendingFiles == nil:
	case *s.PendingFiles == 0:
		fmt.Fprintf(tw, "pending\tno files\n")
	default:
		fmt.Fprintf(tw, "pending\t%d files, %s; oldest %s", *s.PendingFiles, fmtBytes(*s.PendingBytes), s.OldestPending)
		if s.OldestPendingAgeS != nil {
			fmt.Fprintf(tw, " (modified %s ago)", fmtAge(*s.OldestPendingAgeS))
		}
		fmt.Fprintln(tw)
	}
}

// fmtAge renders seconds as a short duration ("3m12s", "2h5m", "4d3h").
func fmtAge(sec float64) string {
	neg := sec < 0
	if neg {
		sec = -sec
	}
	d := time.Duration(sec * float64(time.Second))
	var out string
	switch {
	case d < time.Minute:
		out = d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		out = d.Round(time.Second).String()
	case d < 48*time.Hour:
		out = strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	default:
		days := int64(d / (24 * time.Hour))
		out = fmt.Sprintf("%dd%dh", days, int64((d%(24*time.Hour))/time.Hour))
	}
	if neg {
		return "-" + out
	}
	return out
}

// fmtBytes renders a byte count in binary units.
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// SubtaskPlan is one new subtask's key-group range and the parent state
// files it restores from.
type SubtaskPlan struct {
	// Stage is the stateful stage of a graph pipeline ("" in the linear form).
	Stage       string   `json:"stage,omitempty"`
	Subtask     int      `json:"subtask"`
	KeyGroupLo  int      `json:"kg_lo"`
	KeyGroupHi  int      `json:"kg_hi"`
	ParentFiles []string `json:"parent_files"`
}

// PlanReport is what the next run would do.
type PlanReport struct {
	Status          Status `json:"status"`
	NewGeneration   bool   `json:"new_generation"`
	Reason          string `json:"reason,omitempty"`
	ParallelismFrom int    `json:"parallelism_from,omitempty"`
	ParallelismTo   int    `json:"parallelism_to"`
	MaxParallelism  int    `json:"max_parallelism"`
	// ParallelismNote says that a --parallelism override holds for the
	// next run only (the one after it goes back to state.parallelism).
	ParallelismNote string `json:"parallelism_note,omitempty"`
	Compatible      bool   `json:"compatible"`
	Incompatible    string `json:"incompatible,omitempty"`
	// StateChanges says how the restored state is migrated to an edited
	// plan (an aggregate added, renamed, widened ...).
	StateChanges []string `json:"state_changes,omitempty"`
	// TableChanges says how an iceberg sink's table schema evolves in the
	// commit of the first epoch written by the new plan.
	TableChanges []string      `json:"table_changes,omitempty"`
	Subtasks     []SubtaskPlan `json:"subtasks,omitempty"`
	PendingFiles int           `json:"pending_files"`
	// Workers (plan --workers W) says what each of W worker processes
	// owns, and EpochRequests what the next epoch costs in requests by
	// the cost model (docs/workers.md).
	Workers       []WorkerPlan   `json:"workers,omitempty"`
	EpochRequests *EpochRequests `json:"epoch_requests,omitempty"`
	// Graph draws a graph-form pipeline: its sources, stages (kind, keys,
	// parallelism) and sink, in topological order.
	Graph string `json:"graph,omitempty"`
	// Warnings are what the run would log as warnings before it writes
	// anything (a sink added, a sink taken over from another state ...).
	Warnings []string `json:"warnings,omitempty"`
}

// WorkerPlan is what one worker of a pipeline run by several owns: the
// subtasks [SubtaskLo, SubtaskHi) and their key groups.
type WorkerPlan struct {
	Worker     int `json:"worker"`
	SubtaskLo  int `json:"subtask_lo"`
	SubtaskHi  int `json:"subtask_hi"`
	KeyGroupLo int `json:"key_group_lo"`
	KeyGroupHi int `json:"key_group_hi"`
}

// EpochRequests is the cost model's count of the next epoch's requests:
// the coordination of the workers (Protocol) and the work one process
// would do too (Work), priced at S3's request prices.
type EpochRequests struct {
	Files    int              `json:"files"`
	Rounds   int              `json:"rounds"`
	Protocol cluster.Requests `json:"protocol"`
	Work     cluster.Requests `json:"work"`
	Dollars  float64          `json:"dollars"`
}

// Print writes the plan for people.
func (r *PlanReport) Print(w io.Writer) {
	r.Status.Print(w)
	fmt.Fprintln(w)
	switch {
	case !r.Status.Committed:
		fmt.Fprintf(w, "next run: first generation, parallelism %d, max_parallelism %d\n", r.ParallelismTo, r.MaxParallelism)
	case r.NewGeneration && strings.HasPrefix(r.Reason, "parallelism "):
		fmt.Fprintf(w, "next run: new generation %d (%s)\n", r.Status.Generation+1, r.Reason)
	case r.NewGeneration && r.ParallelismFrom != r.ParallelismTo:
		fmt.Fprintf(w, "next run: new generation %d (%s), parallelism %d -> %d\n", r.Status.Generation+1, r.Reason, r.ParallelismFrom, r.ParallelismTo)
	case r.NewGeneration:
		fmt.Fprintf(w, "next run: new generation %d (%s), parallelism %d\n", r.Status.Generation+1, r.Reason, r.ParallelismTo)
	default:
		fmt.Fprintf(w, "next run: same generation %d, parallelism %d\n", r.Status.Generation, r.ParallelismTo)
	}
	if r.ParallelismNote != "" {
		fmt.Fprintf(w, "note: %s\n", r.ParallelismNote)
	}
	switch {
	case !r.Compatible:
		fmt.Fprintf(w, "state: NOT compatible (incompatible): %s\n", r.Incompatible)
	case len(r.StateChanges) == 0:
		fmt.Fprintln(w, "state: compatible (unchanged)")
	default:
		fmt.Fprintln(w, "state: compatible (migrates automatically):")
		for _, c := range r.StateChanges {
			fmt.Fprintf(w, "  %s\n", c)
		}
	}
	if len(r.TableChanges) > 0 {
		fmt.Fprintln(w, "iceberg table: the schema evolves with the first epoch of this plan:")
		for _, c := range r.TableChanges {
			fmt.Fprintf(w, "  %s\n", c)
		}
	}
	for _, x := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", x)
	}
	fmt.Fprintf(w, "pending input files: %d\n", r.PendingFiles)
	if len(r.Workers) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "worker\tsubtasks\tkey groups\n")
		for _, o := range r.Workers {
			fmt.Fprintf(tw, "%d\t[%d, %d)\t[%d, %d)\n", o.Worker, o.SubtaskLo, o.SubtaskHi, o.KeyGroupLo, o.KeyGroupHi)
		}
		tw.Flush()
	}
	if e := r.EpochRequests; e != nil {
		fmt.Fprintf(w, "next epoch (%d files, %d exchange rounds) by the cost model: coordination %d PUTs + %d GETs, work %d PUTs + %d GETs + %d LISTs; $%.6f at S3 request prices\n",
			e.Files, e.Rounds, e.Protocol.Puts, e.Protocol.Gets, e.Work.Puts, e.Work.Gets, e.Work.Lists, e.Dollars)
	}
	if r.Graph != "" {
		fmt.Fprintf(w, "graph:\n%s", dataflow.Indent(r.Graph, "  "))
	}
	if len(r.Subtasks) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		graph := r.Subtasks[0].Stage != ""
		if graph {
			fmt.Fprintln(tw, "stage\tsubtask\tkey groups\treads parent state files")
		} else {
			fmt.Fprintln(tw, "subtask\tkey groups\treads parent state files")
		}
		for _, s := range r.Subtasks {
			files := strings.Join(s.ParentFiles, ", ")
			if files == "" {
				files = "-"
			}
			if graph {
				fmt.Fprintf(tw, "%s\t", s.Stage)
			}
			fmt.Fprintf(tw, "%d\t[%d, %d)\t%s\n", s.Subtask, s.KeyGroupLo, s.KeyGroupHi, files)
		}
		tw.Flush()
	}
}

// StatusOptions control ReadStatusWith.
type StatusOptions struct {
	// Now is the clock ages are measured against (nil: time.Now).
	Now func() time.Time
	// NoList leaves the source unlisted (no pending files).
	NoList bool
	// HeadOnly reads the head and nothing else: no listing, no chain of
	// retained epochs (for frequent callers such as a metrics writer).
	HeadOnly bool
	// MaxListRequests bounds the requests of a source listing before
	// status warns (0: DefaultMaxListRequests).
	MaxListRequests int64
}

// DefaultMaxListRequests is StatusOptions.MaxListRequests when unset: ten
// LIST pages, 10,000 keys on S3, per run.
const DefaultMaxListRequests = 10

// ReadStatus reads the committed head and the pipeline's health; see
// ReadStatusWith.
func ReadStatus(ctx context.Context, p *spec.Pipeline) (*Status, error) {
	return ReadStatusWith(ctx, p, StatusOptions{})
}

// ReadStatusWith reads the committed head (as a run would recover it, but
// writing nothing), the chain of retained manifests and, unless NoList, the
// source listing, and judges the pipeline's health. It infers no schema and
// compiles nothing. A head that cannot be read because a document is missing
// or corrupt is reported as HealthDamaged with a nil error; a storage error
// is returned.
func ReadStatusWith(ctx context.Context, p *spec.Pipeline, so StatusOptions) (*Status, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	err := sinks.CheckSinks(p)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	if so.Now != nil {
		now = so.Now().UTC()
	}
	if so.HeadOnly {
		so.NoList = true
	}
	st, err := runner.OpenStores(ctx, p, &runner.Options{}, !so.NoList)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	c := epoch.NewCommitter(st.State, nil, p.Name, nil)
	head, err := c.Peek(ctx)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, manifest.ErrCorrupt) {
			s := &Status{Pipeline: p.Name, StateURL: store.Redact(st.StateURL), State: HealthDamaged, Now: &now,
				Health: "damaged: " + oneLine(err.Error()) + " (floe verify checks every retained file)"}
			return s, nil
		}
		return nil, err
	}
	s := headStatus(p, st, head)
	s.StateURL = store.Redact(s.StateURL)
	s.Now = &now
	if m := head.Manifest; m != nil {
		s.WatermarkUS = ptr(m.Watermark)
		t := m.CreatedAt.UTC()
		s.LastCommit, s.LastCommitAgeS = &t, ptr(now.Sub(t).Seconds())
		maxEv := manifest.NoWatermark
		for _, in := range m.Source.Inputs {
			maxEv = max(maxEv, in.MaxEventTime)
		}
		if maxEv != manifest.NoWatermark {
			s.MaxEventTime = runner.FmtWM(maxEv)
		}
		if m.Watermark != manifest.NoWatermark && m.Watermark != math.MaxInt64 {
			if maxEv != manifest.NoWatermark {
				s.WatermarkLagEventS = ptr(float64(maxEv-m.Watermark) / 1e6)
			}
			s.WatermarkLagWallS = ptr(float64(now.UnixMicro()-m.Watermark) / 1e6)
		}
		s.stateSizes(m)
		s.LastEpoch = m.Stats
		if parts, total := lagOf(m.Source.Kafka, nil); parts != nil {
			// As the head recorded it; a listing below replaces it with
			// the broker's high watermarks now.
			s.KafkaPartitions, s.KafkaLag = parts, &total
		}
		if !so.HeadOnly {
			chain, err := c.Chain(ctx, head, math.MaxInt)
			if err != nil {
				return nil, err
			}
			s.RetainedEpochs = len(chain)
			s.OldestRetainedEpoch = chain[len(chain)-1].Epoch
			s.RestorableEpochs = epoch.Epochs(chain)
			var parent *manifest.Manifest
			if len(chain) > 1 { // the epoch the head continues, on its lineage
				parent = chain[1]
			}
			in, rej := lastEpochRejects(m, parent)
			s.rejecting = sinks.Rejecting(in, rej, sinks.RejectedWhere(p))
		}
	}
	if !so.NoList {
		if err := s.pending(ctx, p, st, c, head, now, so.MaxListRequests); err != nil {
			return nil, err
		}
	}
	if p.RootSink().Type == spec.SinkIceberg && head.Generation != nil {
		s.Table = tableStatus(ctx, p, st, head)
	}
	s.judge(head)
	return s, nil
}

// tableStatus reads an Iceberg sink's published epoch and current snapshot;
// a failure is shown, not returned.
func tableStatus(ctx context.Context, p *spec.Pipeline, st *runner.Stores, head *epoch.Head) *TableStatus {
	ts := &TableStatus{Location: owner.IdentityOf(p.RootSink().URL)}
	t, err := iceberg.Open(ctx, st.Sink, ts.Location, iceberg.Options{Renames: sinks.RenamedColumns(p)})
	if err == nil {
		id := p.Name
		if g := head.Generation; g.Identity != nil {
			id = g.Identity.ID
		}
		ts.PublishedEpoch, err = t.PublishedEpoch(ctx, id)
	}
	if err == nil && ts.PublishedEpoch < head.Epoch() {
		err = checkUnpublished(ctx, p, st, head, t, ts.PublishedEpoch)
	}
	if err == nil {
		var h *iceberg.Head
		if h, err = t.Head(ctx); err == nil && h != nil {
			ts.SnapshotID = h.SnapshotID
			ts.Snapshots = h.Snapshots
		}
	}
	if err != nil {
		ts.Error = oneLine(err.Error())
	}
	return ts
}

// checkUnpublished tells why the first committed epoch after published
// cannot be added to the table, if it cannot (its files' schema is one the
// table cannot evolve to); nil when it can, and the next run will.
func checkUnpublished(ctx context.Context, p *spec.Pipeline, st *runner.Stores, head *epoch.Head, t *iceberg.Table, published int64) error {
	chain, err := epoch.NewCommitter(st.State, nil, p.Name, nil).Chain(ctx, head, int(head.Epoch()-published))
	if err != nil {
		return err
	}
	for i := len(chain) - 1; i >= 0; i-- {
		m := chain[i]
		if m.Epoch <= published {
			continue
		}
		for _, o := range m.Outputs {
			if sink, _ := sinks.SplitSinkPath(o.Path); sink != "" {
				continue
			}
			if _, err := t.CheckDataFile(ctx, o.Path); err != nil {
				return fmt.Errorf("epoch %d is committed but cannot be published: %w", m.Epoch, err)
			}
			return nil
		}
	}
	return nil
}

// pending lists the source and counts the files not processed yet. A
// listing error is recorded, not returned: the head is still worth showing.
func (s *Status) pending(ctx context.Context, p *spec.Pipeline, st *runner.Stores, c *epoch.Committer, head *epoch.Head, now time.Time, maxReqs int64) error {
	l := sources.PlanListing(p, false, now, head, false)
	runner.SetKafkaCommitted(st.Source, head)
	req0 := st.Requests()
	files, err := l.List(ctx, p, st.Source, now)
	if err == nil {
		s.kafkaStatus(st.Source, head)
	}
	if err == nil {
		reqs := st.Requests().Sub(req0).Requests.List
		s.ListedKeys, s.ListRequests = ptr(int64(len(files))), &reqs
		s.Listing = "full"
		if !l.Full {
			s.Listing = "after " + l.After
		}
		if maxReqs <= 0 {
			maxReqs = DefaultMaxListRequests
		}
		if reqs > maxReqs {
			s.ListWarning = fmt.Sprintf("listing the source took %d requests (%d keys), more than %d, and every run pays it", reqs, len(files), maxReqs)
			if p.Source.Order == "" {
				s.ListWarning += "; if new keys sort after old ones, source.order: lexical lists only the new ones"
			}
			if sources.ForgetAfterOf(p) == nil {
				s.ListWarning += "; source.forget_after bounds the processed-file set"
			}
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		s.ListError = oneLine(err.Error())
		return nil
	}
	seen := runner.NewSeenLog()
	if m := head.Manifest; m != nil {
		// As the run would: after the frontier only the segments that can
		// hold the listed keys.
		if err := seen.LoadAfter(ctx, c.Store, m.Source.Inline, m.Source.Segments, l.After); err != nil {
			return err
		}
	}
	var n, bytes int64
	var oldest *store.ObjectInfo
	forget := sources.ForgetAfterOf(p)
	for _, f := range sources.PendingFiles(files, seen.Has) {
		if forget != nil && sources.Forgotten(f, forget, now) {
			continue // source.forget_after: never read
		}
		n++
		bytes += f.Size
		if oldest == nil || (!f.ModTime.IsZero() && (oldest.ModTime.IsZero() || f.ModTime.Before(oldest.ModTime))) {
			oldest = &f
		}
	}
	s.PendingFiles, s.PendingBytes = &n, &bytes
	if oldest != nil {
		s.OldestPending = oldest.Key
		if !oldest.ModTime.IsZero() {
			t := oldest.ModTime.UTC()
			s.OldestPendingTime, s.OldestPendingAgeS = &t, ptr(now.Sub(t).Seconds())
		}
	}
	return nil
}

// stateSizes adds up the head's state files per operator and subtask.
func (s *Status) stateSizes(m *manifest.Manifest) {
	for _, op := range m.Operators {
		o := OpState{ID: op.ID}
		idx := map[int]int{}
		sub := func(f manifest.FileRef) *SubtaskState {
			i, ok := idx[f.Subtask]
			if !ok {
				i = len(o.Subtasks)
				idx[f.Subtask] = i
				o.Subtasks = append(o.Subtasks, SubtaskState{Subtask: f.Subtask, KeyGroupLo: f.KeyGroupLo, KeyGroupHi: f.KeyGroupHi})
			}
			return &o.Subtasks[i]
		}
		for _, f := range op.Files {
			x := sub(f)
			x.BaseBytes += f.Size
			x.BaseRows += f.Rows
			o.Bytes += f.Size
			o.Rows += f.Rows
		}
		for _, f := range op.Deltas {
			x := sub(f)
			x.Deltas++
			x.DeltaBytes += f.Size
			o.Bytes += f.Size
		}
		s.StateBytes += o.Bytes
		s.StateRows += o.Rows
		s.Operators = append(s.Operators, o)
	}
	for _, f := range append(append([]manifest.FileRef{}, m.Source.Segments...), m.OutputLog...) {
		s.MetadataBytes += f.Size
	}
}

// lastEpochRejects returns the rows the head epoch read (rejected ones
// included) and rejected: its counters less its parent's (nil for the
// first epoch, or a parent that is not retained: then the whole life).
func lastEpochRejects(head, parent *manifest.Manifest) (in, rejected int64) {
	in, rejected = head.Counters.RowsIn, head.Counters.RowsRejected
	if parent != nil {
		in -= parent.Counters.RowsIn
		rejected -= parent.Counters.RowsRejected
	}
	return in, rejected
}

// judge sets State and Health from what was read.
func (s *Status) judge(head *epoch.Head) {
	var pending int64
	if s.PendingFiles != nil {
		pending = *s.PendingFiles
	}
	drained := head.Manifest != nil && head.Manifest.Watermark == math.MaxInt64
	switch {
	case drained && pending > 0:
		s.State = HealthLateData
		s.Health = fmt.Sprintf("drained, but %d files (%s) arrived after the drain: a run counts their rows late", pending, fmtBytes(*s.PendingBytes))
	case drained:
		s.State, s.Health = HealthDrained, "drained: the input was ended with --drain (a later file's rows count as late)"
	case s.ListError != "":
		s.State, s.Health = HealthUnknown, "unknown: the source cannot be listed: "+s.ListError
	case s.rejecting != "":
		s.State, s.Health = HealthRejecting, s.rejecting
		if pending > 0 {
			s.Health += fmt.Sprintf("; behind by %d files", pending)
		}
	case pending > 0:
		s.State = HealthBehind
		s.Health = fmt.Sprintf("behind by %d files (%s)", pending, fmtBytes(*s.PendingBytes))
		if s.OldestPendingAgeS != nil {
			s.Health += ", the oldest modified " + fmtAge(*s.OldestPendingAgeS) + " ago"
		}
	case head.Manifest == nil:
		s.State, s.Health = HealthEmpty, "nothing committed yet"
	default:
		s.State, s.Health = HealthHealthy, "healthy: caught up"
		if s.LastCommitAgeS != nil {
			s.Health += ", last commit " + fmtAge(*s.LastCommitAgeS) + " ago"
		}
	}
	// Guard rails: what the pipeline put up with, over its life.
	if c := s.Counters; c != nil {
		for _, g := range []struct {
			n    int64
			what string
		}{
			{c.FilesRejectedWhole, "input files rejected whole (floe reprocess --rejected reads them again)"},
			{c.FilesAfterDrain, "input files read after --drain (their rows were late)"},
			{c.FilesChanged, "input files changed after they were read (not read again)"},
		} {
			if g.n > 0 {
				s.Health += fmt.Sprintf("; %d %s", g.n, g.what)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

func headStatus(p *spec.Pipeline, st *runner.Stores, head *epoch.Head) *Status {
	s := &Status{Pipeline: p.Name, StateURL: st.StateURL}
	if m := head.Manifest; m != nil {
		c := m.Counters
		s.Committed, s.Generation, s.Epoch = true, m.Generation, m.Epoch
		s.Parallelism, s.Watermark, s.Counters, s.FilesSeen = head.Generation.Parallelism, runner.FmtWM(m.Watermark), &c, m.Source.Count
		s.Workers = head.Generation.Workers
	}
	return s
}

// Plan reports, without writing anything, what the next run would do: it
// runs the same planner as Run, on the head as Run would recover it.
func Plan(ctx context.Context, p *spec.Pipeline, opts runner.Options) (*PlanReport, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	err := sinks.CheckSinks(p)
	if err != nil {
		return nil, err
	}
	if err := owner.CheckLocations(p); err != nil {
		return nil, err
	}
	st, err := runner.OpenStores(ctx, p, &opts, true)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	c := epoch.NewCommitter(st.State, nil, p.Name, nil)
	head, err := c.Peek(ctx)
	if err != nil {
		return nil, err
	}
	rp, err := runner.PlanRun(ctx, p, st, &opts, head)
	if err != nil {
		return nil, err
	}
	defer rp.From.Close()
	rep := &PlanReport{Status: *headStatus(p, st, head), ParallelismTo: rp.Parallelism, MaxParallelism: rp.K,
		NewGeneration: rp.NewGeneration && head.Manifest != nil, Compatible: rp.Refusal == nil}
	if rep.NewGeneration {
		rep.Reason = rp.Reason
	}
	rep.ParallelismNote = runner.ParallelismNote(p, &opts)
	if rp.Refusal != nil {
		rep.Incompatible = rp.Refusal.Error()
	} else {
		rep.Warnings = rp.Identity.Warnings
	}
	if gp := rp.Plan.Graph; gp != nil && rp.Refusal == nil {
		for _, n := range gp.State {
			// A linear pipeline's one window needs no stage name.
			pre := "stage " + n.Name + ": "
			if gp.Linear {
				pre = ""
			}
			switch m := rp.Stages[n.Name]; {
			case m == nil:
			case m.Chain != nil:
				rep.StateChanges = append(rep.StateChanges, pre+dataflow.DescribeChain(m.Chain))
			default:
				for _, c := range m.Ev.Changes() {
					rep.StateChanges = append(rep.StateChanges, pre+c)
				}
			}
		}
	}
	if rp.Refusal == nil {
		rep.TableChanges = rp.TableChanges
	}
	if hg := head.Generation; hg != nil {
		rep.ParallelismFrom = hg.Parallelism
	}
	seen := runner.NewSeenLog()
	if m := head.Manifest; m != nil {
		if err := seen.Load(ctx, c, m.Source.Inline, m.Source.Segments); err != nil {
			return nil, err
		}
	}
	pend := sources.PendingFiles(rp.Files, seen.Has)
	rep.PendingFiles = len(pend)
	if opts.Workers > 1 {
		top := cluster.Topology{Workers: opts.Workers, Parallelism: rp.Parallelism, MaxParallelism: rp.K}
		for _, o := range top.Owners() {
			rep.Workers = append(rep.Workers, WorkerPlan{Worker: o.Worker, SubtaskLo: o.SubtaskLo, SubtaskHi: o.SubtaskHi,
				KeyGroupLo: o.KeyGroupLo, KeyGroupHi: o.KeyGroupHi})
		}
		shape := cluster.Shape{Workers: opts.Workers, Parallelism: rp.Parallelism,
			Files: len(decide.NewConfig(p).SelectFiles(pend)), Rounds: runner.WorkerRounds(rp.Plan.Graph)}
		proto, work := cluster.Protocol(shape), cluster.Work(shape)
		rep.EpochRequests = &EpochRequests{Files: shape.Files, Rounds: shape.Rounds, Protocol: proto, Work: work,
			Dollars: proto.Add(work).Dollars()}
	}
	if runner.IsGraph(p) {
		rep.Graph = dataflow.DescribeGraph(p, rp.Parallelism)
	}
	addSubtasks := func(stage string, srs []runner.SubtaskRestore) {
		for s, sr := range srs {
			sp := SubtaskPlan{Stage: stage, Subtask: s, KeyGroupLo: sr.Lo, KeyGroupHi: sr.Hi, ParentFiles: []string{}}
			for _, f := range sr.Files {
				sp.ParentFiles = append(sp.ParentFiles, f.Path)
			}
			rep.Subtasks = append(rep.Subtasks, sp)
		}
	}
	if gp := rp.Plan.Graph; gp != nil {
		// Each stateful stage restores its subtasks as restoreGraph does
		// (a linear pipeline's window unnamed, as its form has one).
		m := rp.From.Manifest
		if rp.From.Kind == manifest.RestoreReset {
			m = nil
		}
		for _, n := range gp.State {
			srs, _, _ := runner.RestoreSources(m, n.Name, rp.Parallelism, rp.K)
			name := n.Name
			if gp.Linear {
				name = ""
			}
			addSubtasks(name, srs)
		}
	}
	return rep, nil
}

// formatEpochs renders restorable epochs (newest first) oldest first, runs of
// consecutive epochs shortened: "(4, 5, 9..12)"; without the list (a status
// decoded from an older floe's JSON) "(lo..hi)".
func formatEpochs(es []int64, lo, hi int64) string {
	if len(es) == 0 {
		return fmt.Sprintf("(%d..%d)", lo, hi)
	}
	var parts []string
	for i := len(es) - 1; i >= 0; {
		j := i
		for j > 0 && es[j-1] == es[j]+1 {
			j--
		}
		switch {
		case i == j:
			parts = append(parts, strconv.FormatInt(es[i], 10))
		case i-j == 1:
			parts = append(parts, strconv.FormatInt(es[i], 10), strconv.FormatInt(es[j], 10))
		default:
			parts = append(parts, fmt.Sprintf("%d..%d", es[i], es[j]))
		}
		i = j - 1
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
