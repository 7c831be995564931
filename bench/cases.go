package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
)

// Pipeline shapes of FloeJob.Case and DuckJob.Case (issue 8). The empty
// string is the original benchmark: a 1-minute tumbling count and sum per
// user.
const (
	CaseTumbling = ""
	// CaseSliding: 5-minute windows starting every minute per user, with
	// clicks = count() and total_bytes = sum(bytes).
	CaseSliding = "sliding"
	// CaseDaily: one 24-hour tumbling window per user with clicks = count()
	// and pages = count_distinct(page); the state grows with every epoch
	// and no window closes before the drain.
	CaseDaily = "daily"
	// CaseFilter: a filter stage (FilterExpr) and no window; the output is
	// the input rows that pass.
	CaseFilter = "filter"
)

// FilterExpr is CaseFilter's predicate in floe's expression language;
// FilterSQL is the same predicate for DuckDB. About 39% of the generated
// rows pass.
const (
	FilterExpr = "bytes >= 1000"
	FilterSQL  = "bytes >= 1000"
)

// SlideSize and Slide shape CaseSliding's windows.
const (
	SlideSize = 5 * time.Minute
	Slide     = time.Minute
)

// ValidCase reports whether c names a pipeline shape.
func ValidCase(c string) bool {
	return slices.Contains([]string{CaseTumbling, CaseSliding, CaseDaily, CaseFilter}, c)
}

// window returns the window operator of case c, or nil for CaseFilter.
func window(c string) (*spec.Window, error) {
	switch c {
	case CaseTumbling:
		return spec.NewTumbling(time.Minute).By("user_id").
			Agg("clicks", spec.Count, "").
			Agg("total_bytes", spec.Sum, "bytes"), nil
	case CaseSliding:
		return spec.NewSliding(SlideSize, Slide).By("user_id").
			Agg("clicks", spec.Count, "").
			Agg("total_bytes", spec.Sum, "bytes"), nil
	case CaseDaily:
		return spec.NewTumbling(24*time.Hour).By("user_id").
			Agg("clicks", spec.Count, "").
			Agg("pages", spec.CountDistinct, "page"), nil
	case CaseFilter:
		return nil, nil
	}
	return nil, fmt.Errorf("unknown benchmark case %q (want %q, %q, %q or %q)", c, CaseTumbling, CaseSliding, CaseDaily, CaseFilter)
}

// selectSQL returns case c's DuckDB SELECT over the table expression src.
func selectSQL(c, src string) (string, error) {
	switch c {
	case CaseTumbling:
		return "SELECT user_id, time_bucket(INTERVAL 1 minute, event_time) AS window_start, " +
			"count(*) AS clicks, sum(bytes)::BIGINT AS total_bytes FROM " + src + " GROUP BY ALL", nil
	case CaseSliding:
		// Every row belongs to the windows starting at its minute and the
		// SlideSize/Slide-1 minutes before: aggregate per minute first, then
		// spread each minute over its windows (the naive form joins every
		// row with range(5) and groups five times the rows).
		n, sl, sz := int(SlideSize/Slide), int(Slide.Seconds()), int(SlideSize.Seconds())
		return fmt.Sprintf("SELECT user_id, m - k * INTERVAL %d second AS window_start, "+
			"m - k * INTERVAL %d second + INTERVAL %d second AS window_end, "+
			"sum(c)::BIGINT AS clicks, sum(b)::BIGINT AS total_bytes FROM ("+
			"SELECT user_id, time_bucket(INTERVAL %d second, event_time) AS m, count(*) AS c, sum(bytes) AS b FROM %s GROUP BY ALL"+
			") CROSS JOIN range(%d) AS r(k) GROUP BY ALL", sl, sl, sz, sl, src, n), nil
	case CaseDaily:
		// Bucketed as TIMESTAMP: time_bucket of a day over TIMESTAMPTZ goes
		// through the time-zone calendar and took DuckDB 18x longer here
		// (1m41s against 5.6s over 2M rows).
		return "SELECT user_id, time_bucket(INTERVAL 1 day, event_time::TIMESTAMP) AS window_start, " +
			"count(*) AS clicks, count(DISTINCT page) AS pages FROM " + src + " GROUP BY ALL", nil
	case CaseFilter:
		return "SELECT event_time, user_id, page, bytes FROM " + src + " WHERE " + FilterSQL, nil
	}
	return "", fmt.Errorf("duckdb: unknown benchmark case %q", c)
}

// normSQL returns the SELECT list that puts an output of case c (floe's or
// DuckDB's) into the comparable form: the identifying columns, then a and b,
// the two numbers the summary adds up.
func normSQL(c string) (string, error) {
	switch c {
	case CaseTumbling:
		return "user_id, epoch_us(window_start) AS ws, clicks::BIGINT AS a, total_bytes::BIGINT AS b", nil
	case CaseSliding:
		return "user_id, epoch_us(window_start) AS ws, epoch_us(window_end) AS we, clicks::BIGINT AS a, total_bytes::BIGINT AS b", nil
	case CaseDaily:
		return "user_id, epoch_us(window_start) AS ws, clicks::BIGINT AS a, pages::BIGINT AS b", nil
	case CaseFilter:
		return "epoch_us(event_time) AS ws, user_id, page, 1::BIGINT AS a, bytes::BIGINT AS b", nil
	}
	return "", fmt.Errorf("compare: unknown benchmark case %q", c)
}

// EpochCost is what one committed epoch cost, read from its manifest.
type EpochCost struct {
	Epoch      int64
	Seconds    float64 // the manifest's stats: the epoch's wall time before its commit
	Files      int64   // input files
	RowsIn     int64
	BytesOut   int64 // everything the epoch wrote (stats.bytes_written)
	BaseBytes  int64 // state base files written in this epoch (full snapshots of subtasks)
	BaseRows   int64 // windows in those bases
	DeltaBytes int64 // state delta files (upserts, tombstones) written in this epoch
	DeltaRows  int64
	// StateBytes and StateRows describe the state the manifest refers to
	// after the epoch: all bases and deltas, rows of the bases only.
	StateBytes, StateRows int64
	// Requests are the manifest's stats: the object-store requests of the
	// epoch before its commit (with several workers, summed over their
	// parts), without the manifest create and the pointer swap.
	Gets, Puts, Lists int64
}

// StateWritten is the state bytes the epoch wrote, bases and deltas.
func (e EpochCost) StateWritten() int64 { return e.BaseBytes + e.DeltaBytes }

// EpochCosts reads every manifest kept under the file:// state root of the
// pipeline named pipeline (so run it with retain_epochs above the epoch
// count) and returns one EpochCost per epoch, oldest first. A state file
// belongs to the epoch whose directory holds it.
func EpochCosts(stateDir, pipeline string) ([]EpochCost, error) {
	root := filepath.Join(stateDir, pipeline)
	paths, err := filepath.Glob(filepath.Join(root, "gen=*", "epoch=*", manifest.ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("epoch costs: list manifests under %s: %w", root, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("epoch costs: no manifests under %s", root)
	}
	var out []EpochCost
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("epoch costs: %w", err)
		}
		m, err := manifest.DecodeManifest(p, data)
		if err != nil {
			return nil, fmt.Errorf("epoch costs: %w", err)
		}
		e := EpochCost{Epoch: m.Epoch}
		if s := m.Stats; s != nil {
			e.Seconds, e.Files, e.RowsIn, e.BytesOut = float64(s.DurationMs)/1000, s.FilesIn, s.RowsIn, s.BytesWritten
			e.Gets, e.Puts, e.Lists = s.Gets, s.Puts, s.Lists
		}
		dir := manifest.EpochDir(m.Generation, m.Epoch)
		for _, op := range m.Operators {
			for _, f := range op.Files {
				e.StateBytes += f.Size
				e.StateRows += f.Rows
				if strings.HasPrefix(f.Path, dir) {
					e.BaseBytes += f.Size
					e.BaseRows += f.Rows
				}
			}
			for _, f := range op.Deltas {
				e.StateBytes += f.Size
				if strings.HasPrefix(f.Path, dir) {
					e.DeltaBytes += f.Size
					e.DeltaRows += f.Rows
				}
			}
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b EpochCost) int { return int(a.Epoch - b.Epoch) })
	return out, nil
}

// EpochGroups splits files (sorted) into the groups of at most perEpoch files
// that floe's epochs take, oldest first.
func EpochGroups(files []string, perEpoch int) [][]string {
	s := slices.Clone(files)
	slices.Sort(s)
	var out [][]string
	for len(s) > 0 {
		n := min(perEpoch, len(s))
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// GroupStat describes one group of input files.
type GroupStat struct {
	Rows  int64 // rows in the group
	Users int64 // distinct user_id values: the daily windows an epoch over the group changes
}

// GroupStats returns, per group of Parquet files, its rows and distinct
// users, as DuckDB counts them.
func GroupStats(ctx context.Context, groups [][]string) ([]GroupStat, error) {
	db, err := OpenDuckDB(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	out := make([]GroupStat, len(groups))
	for i, g := range groups {
		if err := db.QueryRowContext(ctx, "SELECT count(*), count(DISTINCT user_id) FROM read_parquet("+sqlList(g)+")").Scan(&out[i].Rows, &out[i].Users); err != nil {
			return nil, fmt.Errorf("group %d of %d files: %w", i+1, len(g), err)
		}
	}
	return out, nil
}
