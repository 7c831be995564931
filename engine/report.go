package engine

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
)

// Status describes a pipeline's committed head.
type Status struct {
	Pipeline    string             `json:"pipeline"`
	StateURL    string             `json:"state_url"`
	Committed   bool               `json:"committed"`
	Generation  int64              `json:"generation,omitempty"`
	Epoch       int64              `json:"epoch,omitempty"`
	Parallelism int                `json:"parallelism,omitempty"`
	Watermark   string             `json:"watermark,omitempty"`
	Counters    *manifest.Counters `json:"counters,omitempty"`
	FilesSeen   int64              `json:"files_seen"`
}

// Print writes the status as a small table.
func (s *Status) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "pipeline\t%s\nstate\t%s\n", s.Pipeline, s.StateURL)
	if !s.Committed {
		fmt.Fprintf(tw, "head\tnothing committed yet\n")
		tw.Flush()
		return
	}
	fmt.Fprintf(tw, "head\tgeneration %d, epoch %d, parallelism %d\n", s.Generation, s.Epoch, s.Parallelism)
	fmt.Fprintf(tw, "watermark\t%s\n", s.Watermark)
	c := s.Counters
	fmt.Fprintf(tw, "files in\t%d\nrows in\t%d\nrows out\t%d\nrows late\t%d\nrows rejected\t%d\nrows filtered\t%d\nwindows emitted\t%d\n",
		c.FilesIn, c.RowsIn, c.RowsOut, c.RowsLate, c.RowsRejected, c.RowsFiltered, c.Windows)
	tw.Flush()
}

// SubtaskPlan is one new subtask's key-group range and the parent state
// files it restores from.
type SubtaskPlan struct {
	Subtask     int      `json:"subtask"`
	KeyGroupLo  int      `json:"kg_lo"`
	KeyGroupHi  int      `json:"kg_hi"`
	ParentFiles []string `json:"parent_files"`
}

// PlanReport is what the next run would do.
type PlanReport struct {
	Status          Status        `json:"status"`
	NewGeneration   bool          `json:"new_generation"`
	Reason          string        `json:"reason,omitempty"`
	ParallelismFrom int           `json:"parallelism_from,omitempty"`
	ParallelismTo   int           `json:"parallelism_to"`
	MaxParallelism  int           `json:"max_parallelism"`
	Compatible      bool          `json:"compatible"`
	Incompatible    string        `json:"incompatible,omitempty"`
	Subtasks        []SubtaskPlan `json:"subtasks,omitempty"`
	PendingFiles    int           `json:"pending_files"`
}

// Print writes the plan for people.
func (r *PlanReport) Print(w io.Writer) {
	r.Status.Print(w)
	fmt.Fprintln(w)
	switch {
	case !r.Status.Committed:
		fmt.Fprintf(w, "next run: first generation, parallelism %d, max_parallelism %d\n", r.ParallelismTo, r.MaxParallelism)
	case r.NewGeneration:
		fmt.Fprintf(w, "next run: new generation %d (%s), parallelism %d -> %d\n", r.Status.Generation+1, r.Reason, r.ParallelismFrom, r.ParallelismTo)
	default:
		fmt.Fprintf(w, "next run: same generation %d, parallelism %d\n", r.Status.Generation, r.ParallelismTo)
	}
	if r.Compatible {
		fmt.Fprintln(w, "state: compatible")
	} else {
		fmt.Fprintf(w, "state: NOT compatible: %s\n", r.Incompatible)
	}
	fmt.Fprintf(w, "pending input files: %d\n", r.PendingFiles)
	if len(r.Subtasks) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "subtask\tkey groups\treads parent state files")
		for _, s := range r.Subtasks {
			files := strings.Join(s.ParentFiles, ", ")
			if files == "" {
				files = "-"
			}
			fmt.Fprintf(tw, "%d\t[%d, %d)\t%s\n", s.Subtask, s.KeyGroupLo, s.KeyGroupHi, files)
		}
		tw.Flush()
	}
}

// ReadStatus reads the committed head (read-only: no roll-forward, no listing
// of the source, no schema).
func ReadStatus(ctx context.Context, p *spec.Pipeline) (*Status, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	st, err := openStores(ctx, p, &Options{}, false)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	head, err := epoch.NewCommitter(st.state, nil, p.Name, nil).Peek(ctx)
	if err != nil {
		return nil, err
	}
	return headStatus(p, st, head), nil
}

func headStatus(p *spec.Pipeline, st *stores, head *epoch.Head) *Status {
	s := &Status{Pipeline: p.Name, StateURL: st.stateURL}
	if m := head.Manifest; m != nil {
		c := m.Counters
		s.Committed, s.Generation, s.Epoch = true, m.Generation, m.Epoch
		s.Parallelism, s.Watermark, s.Counters, s.FilesSeen = head.Generation.Parallelism, fmtWM(m.Watermark), &c, m.Source.Count
	}
	return s
}

// Plan reports, without writing anything, what the next run would do: it
// runs the same planner as Run, on the head as Run would recover it.
func Plan(ctx context.Context, p *spec.Pipeline, opts Options) (*PlanReport, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := checkLocations(p); err != nil {
		return nil, err
	}
	st, err := openStores(ctx, p, &opts, true)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	c := epoch.NewCommitter(st.state, nil, p.Name, nil)
	head, err := c.Peek(ctx)
	if err != nil {
		return nil, err
	}
	rp, err := planRun(ctx, p, st, &opts, head)
	if err != nil {
		return nil, err
	}
	rep := &PlanReport{Status: *headStatus(p, st, head), ParallelismTo: rp.parallelism, MaxParallelism: rp.k,
		NewGeneration: rp.newGeneration && head.Manifest != nil, Compatible: rp.refusal == nil}
	if rep.NewGeneration {
		rep.Reason = rp.reason
	}
	if rp.refusal != nil {
		rep.Incompatible = rp.refusal.Error()
	}
	if hg := head.Generation; hg != nil {
		rep.ParallelismFrom = hg.Parallelism
	}
	seen := newSeenLog()
	if m := head.Manifest; m != nil {
		if err := seen.Load(ctx, c, m.Source.Inline, m.Source.Segments); err != nil {
			return nil, err
		}
	}
	rep.PendingFiles = len(pendingFiles(rp.files, seen.Has))
	for s, sr := range rp.restore {
		sp := SubtaskPlan{Subtask: s, KeyGroupLo: sr.lo, KeyGroupHi: sr.hi, ParentFiles: []string{}}
		for _, f := range sr.files {
			sp.ParentFiles = append(sp.ParentFiles, f.Path)
		}
		rep.Subtasks = append(rep.Subtasks, sp)
	}
	return rep, nil
}
