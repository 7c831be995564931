package engine

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/floe-dev/floe/engine/internal/runner"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
)

// EpochRecord is one retained epoch as History reports it. A nil field is
// not known: the epoch's manifest has no stats (written before they were
// recorded), or the parent needed for a per-epoch difference is gone.
type EpochRecord struct {
	Generation  int64     `json:"generation"`
	Epoch       int64     `json:"epoch"`
	CommittedAt time.Time `json:"committed_at"`
	DurationS   *float64  `json:"duration_s"`
	Files       *int64    `json:"files"`
	BytesIn     *int64    `json:"bytes_in"`
	// Rows of this epoch: differences of the manifest's cumulative counters
	// and its parent's.
	RowsIn       *int64 `json:"rows_in"`
	RowsOut      *int64 `json:"rows_out"`
	RowsLate     *int64 `json:"rows_late"`
	RowsRejected *int64 `json:"rows_rejected"`
	OutputFiles  int    `json:"output_files"`
	BytesWritten *int64 `json:"bytes_written"`
	// Object-store requests of the epoch before its commit (the manifest
	// create and pointer swap are not included), and retries among them.
	Gets      *int64 `json:"gets"`
	Puts      *int64 `json:"puts"`
	Lists     *int64 `json:"lists"`
	Deletes   *int64 `json:"deletes"`
	Retries   *int64 `json:"retries"`
	Watermark string `json:"watermark"`
	// Continues is set on the first epoch of a generation restored by a
	// rollback or savepoint: the epoch whose state it continues (its rows
	// are differences against that one). The epochs between it and the
	// head the restore replaced were abandoned and are not listed.
	Continues *int64 `json:"continues_epoch,omitempty"`
	// Restore says how ("rollback", "savepoint <name>") when Continues is set.
	Restore string `json:"restore,omitempty"`
}

// History returns the retained epochs of the head's lineage, newest first,
// at most limit of them (limit <= 0: all). It reads only manifests and
// generation records: the lineage from the head as Peek finds it
// (epoch.Committer.Chain: through parents, and from the first epoch of a
// rolled-back or restored generation to the epoch it restored), until
// retention's cut. Each epoch's rows are differences against its lineage
// parent; epochs a rollback abandoned are not listed (the restoring epoch
// says which one it continues).
func History(ctx context.Context, p *spec.Pipeline, limit int) ([]EpochRecord, error) {
	st, c, head, err := runner.OpenHead(ctx, p)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	n := int(^uint(0) >> 1)
	if limit > 0 {
		n = limit + 1 // one more: the parent of the oldest shown, for its differences
	}
	chain, err := c.Chain(ctx, head, n)
	if err != nil {
		return nil, err
	}
	recs := epochRecords(chain, limit)
	for i := range recs {
		m := chain[i]
		var lp *manifest.Ref
		if i+1 < len(chain) {
			lp = &manifest.Ref{Generation: chain[i+1].Generation, Epoch: chain[i+1].Epoch}
		} else if lp, err = c.LineageParent(ctx, m); err != nil {
			return nil, err
		}
		if m.Parent != nil && m.Parent.Generation != m.Generation {
			g, err := c.ReadGeneration(ctx, m.Generation)
			if err != nil {
				return nil, err
			}
			if rf := g.RestoredFrom; rf != nil && (rf.Kind == manifest.RestoreRollback || rf.Kind == manifest.RestoreSavepoint) {
				recs[i].Restore = rf.Kind
				if rf.Kind == manifest.RestoreSavepoint {
					recs[i].Restore += " " + rf.Savepoint
				}
				if lp != nil {
					recs[i].Continues = ptr(lp.Epoch)
				}
			}
		}
		if i+1 == len(chain) && m.Parent == nil && m.Counters != (manifest.Counters{}) {
			// A first manifest that continues a savepoint's counters (a
			// restore into an empty state): no parent to take differences of.
			if g, err := c.ReadGeneration(ctx, m.Generation); err == nil && g.Parent != nil {
				recs[i].RowsIn, recs[i].RowsOut, recs[i].RowsLate, recs[i].RowsRejected = nil, nil, nil, nil
				if m.Stats == nil {
					recs[i].Files = nil
				}
			}
		}
	}
	return recs, nil
}

// epochRecords turns a chain (newest first) into records; the last manifest
// serves only as a parent when the chain holds more than limit.
func epochRecords(chain []*manifest.Manifest, limit int) []EpochRecord {
	out := make([]EpochRecord, 0, len(chain))
	for i, m := range chain {
		if limit > 0 && i == limit {
			break
		}
		r := EpochRecord{Generation: m.Generation, Epoch: m.Epoch, CommittedAt: m.CreatedAt.UTC(),
			OutputFiles: len(m.Outputs), Watermark: runner.FmtWM(m.Watermark)}
		var parent *manifest.Counters
		switch {
		case i+1 < len(chain):
			parent = &chain[i+1].Counters
		case m.Parent == nil:
			parent = &manifest.Counters{} // the first epoch: counters start at zero
		}
		if parent != nil {
			c := m.Counters
			r.RowsIn = ptr(c.RowsIn - parent.RowsIn)
			r.RowsOut = ptr(c.RowsOut - parent.RowsOut)
			r.RowsLate = ptr(c.RowsLate - parent.RowsLate)
			r.RowsRejected = ptr(c.RowsRejected - parent.RowsRejected)
			r.Files = ptr(c.FilesIn - parent.FilesIn)
		}
		if s := m.Stats; s != nil {
			r.DurationS = ptr(float64(s.DurationMs) / 1000)
			r.Files, r.BytesIn, r.BytesWritten = ptr(s.FilesIn), ptr(s.BytesIn), ptr(s.BytesWritten)
			r.Gets, r.Puts, r.Lists, r.Deletes, r.Retries = ptr(s.Gets), ptr(s.Puts), ptr(s.Lists), ptr(s.Deletes), ptr(s.Retries)
		}
		out = append(out, r)
	}
	return out
}

// PrintHistory writes records as a table, one line per epoch, "-" where a
// figure is not known.
func PrintHistory(w io.Writer, recs []EpochRecord) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "gen\tepoch\tcommitted at\tdur\tfiles\tin\tout\tlate\trej\tout files\twritten\tget\tput\tlist\tdel\tretry\twatermark\tlineage\t")
	for _, r := range recs {
		dur := "-"
		if r.DurationS != nil {
			dur = strconv.FormatFloat(*r.DurationS, 'f', 2, 64) + "s"
		}
		written := "-"
		if r.BytesWritten != nil {
			written = fmtBytes(*r.BytesWritten)
		}
		lineage := ""
		if r.Restore != "" {
			lineage = r.Restore
			if r.Continues != nil {
				lineage += ": continues epoch " + strconv.FormatInt(*r.Continues, 10)
			}
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			r.Generation, r.Epoch, r.CommittedAt.Format(time.RFC3339), dur, dash(r.Files), dash(r.RowsIn), dash(r.RowsOut),
			dash(r.RowsLate), dash(r.RowsRejected), r.OutputFiles, written, dash(r.Gets), dash(r.Puts), dash(r.Lists),
			dash(r.Deletes), dash(r.Retries), r.Watermark, lineage)
	}
	tw.Flush()
}

func dash(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}
