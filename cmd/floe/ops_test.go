package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/store"
)

func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("storage down"), 2},
		{&exitError{code: 1, err: errors.New("damage")}, 1},
		{fmt.Errorf("epoch 3: %w", engine.ErrFenced), 3},
		{fmt.Errorf("%w; this run stops", epoch.ErrSuperseded), 3},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// hookStore runs before() once, just before the first Put of key.
type hookStore struct {
	store.Store
	key    string
	once   *sync.Once
	before func()
}

func (h *hookStore) Put(ctx context.Context, key string, data []byte, opts store.PutOptions) (string, error) {
	if key == h.key {
		h.once.Do(h.before)
	}
	return h.Store.Put(ctx, key, data, opts)
}

// TestCLIFencedExitCode: while `floe run` is about to swap the pointer of
// its first epoch, a second writer of the same pipeline commits every
// epoch. The first run must exit 3 (not 2: nothing is broken, someone else
// is running it), with a summary line before the reason.
func TestCLIFencedExitCode(t *testing.T) {
	spec, _ := sampleSpec(t)
	p, err := loadSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var errB error
	testWrapStore = func(name string, s store.Store) store.Store {
		if name != "state" {
			return s
		}
		return &hookStore{Store: s, key: "_latest.json", once: &once, before: func() {
			_, errB = engine.Run(context.Background(), p, engine.Options{})
		}}
	}
	defer func() { testWrapStore = nil }()
	code, out, errOut := floe("run", spec)
	if errB != nil {
		t.Fatalf("second writer: %v", errB)
	}
	if code != 3 || !strings.Contains(errOut, "another writer") {
		t.Fatalf("fenced run: code %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	lines := lastLines(errOut, 2)
	if !strings.HasPrefix(lines[0], "pipeline clicks-per-user: another writer committed on top") || !strings.HasPrefix(lines[1], "floe: superseded") {
		t.Fatalf("want a summary line then the reason, got:\n%s", errOut)
	}
}

// TestCLIFailureSummary: a run that fails in its second epoch says what
// its first committed before the reason, and exits 2.
func TestCLIFailureSummary(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "in")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "a.jsonl"), []byte(`{"event_time":"2024-01-01T00:00:10Z","user_id":"u1","page":"/","bytes":1}`+"\n"), 0o644)
	os.WriteFile(filepath.Join(src, "b.jsonl"), []byte("not json\n"), 0o644)
	spec := filepath.Join(dir, "p.yaml")
	os.WriteFile(spec, []byte(`name: p
source: {type: files, url: in, format: jsonl, max_files_per_epoch: 1, on_error: fail,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64}, event_time: event_time}
operators: [{filter: "bytes > 0"}]
sink: {type: files, url: out, format: parquet}
state: {url: state}
`), 0o644)
	code, out, errOut := floe("run", spec)
	if code != 2 || out != "" {
		t.Fatalf("code %d, stdout %q", code, out)
	}
	lines := lastLines(errOut, 2)
	if !strings.Contains(lines[0], "this run committed epochs 1..1: 1 files, 1 rows in") ||
		!strings.Contains(lines[0], "continues from epoch 1") || !strings.Contains(lines[1], "on_error: fail") {
		t.Fatalf("stderr:\n%s", errOut)
	}
}

// lastLines returns the last n lines of s (logs come before them).
func lastLines(s string, n int) []string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) < n {
		return append(make([]string, n-len(l)), l...)
	}
	return l[len(l)-n:]
}

func TestCLIStatusAndHistory(t *testing.T) {
	spec, _ := sampleSpec(t)
	code, out, _ := floe("status", spec)
	if code != 0 || !strings.HasPrefix(out, "health ") || !strings.Contains(strings.SplitN(out, "\n", 2)[0], "behind by 6 files") {
		t.Fatalf("status before the first run: code %d\n%s", code, out)
	}
	if code, out, e := floe("run", spec); code != 0 {
		t.Fatalf("run: %s%s", out, e)
	}
	code, out, _ = floe("status", spec)
	for _, want := range []string{"health ", "healthy: caught up", "last commit", "generation 1, epoch 3, parallelism 2",
		"pending", "no files", "retained epochs  3 (1..3)", "state size", "op=window s=1", "last epoch", "rows rejected    12"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("status lacks %q (code %d):\n%s", want, code, out)
		}
	}
	code, out, _ = floe("status", spec, "--json")
	var st engine.Status
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.State != engine.HealthHealthy || st.LastCommit == nil ||
		*st.PendingFiles != 0 || st.RetainedEpochs != 3 || st.StateBytes == 0 {
		t.Fatalf("status --json: code %d, %v\n%s", code, err, out)
	}

	code, out, _ = floe("history", spec)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 4 || !strings.Contains(lines[0], "epoch") || !strings.Contains(lines[0], "put") {
		t.Fatalf("history: code %d\n%s", code, out)
	}
	if f := strings.Fields(lines[1]); f[1] != "3" || f[0] != "1" {
		t.Fatalf("history: newest first, got %q", lines[1])
	}
	code, out, _ = floe("history", spec, "--last", "1", "--json")
	var recs []engine.EpochRecord
	if err := json.Unmarshal([]byte(out), &recs); code != 0 || err != nil || len(recs) != 1 || recs[0].Epoch != 3 || recs[0].Puts == nil {
		t.Fatalf("history --last 1 --json: code %d, %v\n%s", code, err, out)
	}
}

// parseMetrics parses a Prometheus text-format file with the reference
// parser.
func parseMetrics(t *testing.T, path string) map[string]*dto.MetricFamily {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("metrics file does not parse: %v\n%s", err, data)
	}
	return fams
}

func metricValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("metric %s missing", name)
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				found = found || (l.GetName() == labels[i] && l.GetValue() == labels[i+1])
			}
			if !found {
				continue next
			}
		}
		if m.Counter != nil {
			return m.Counter.GetValue()
		}
		return m.Gauge.GetValue()
	}
	t.Fatalf("metric %s%v missing", name, labels)
	return 0
}

func TestCLIMetricsFile(t *testing.T) {
	spec, dir := sampleSpec(t)
	mdir := filepath.Join(dir, "textfile")
	os.MkdirAll(mdir, 0o755)
	mfile := filepath.Join(mdir, "floe.prom")
	if code, out, e := floe("run", spec, "--metrics-file", mfile); code != 0 {
		t.Fatalf("run: %s%s", out, e)
	}
	fams := parseMetrics(t, mfile)
	_, out, _ := floe("status", spec, "--json")
	var st engine.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	c := st.Counters
	for _, x := range []struct {
		name string
		want float64
	}{
		{"floe_head_epoch", 3}, {"floe_run_epochs_committed_total", 3}, {"floe_files_in_total", float64(c.FilesIn)},
		{"floe_rows_in_total", float64(c.RowsIn)}, {"floe_rows_out_total", float64(c.RowsOut)}, {"floe_rows_late_total", 4},
		{"floe_rows_rejected_total", 12}, {"floe_pending_files", 0}, {"floe_run_exit_code", 0},
		{"floe_watermark_seconds", float64(*st.WatermarkUS) / 1e6},
		{"floe_last_commit_timestamp_seconds", float64(st.LastCommit.UnixMilli()) / 1e3},
		{"floe_state_bytes", float64(st.StateBytes)},
	} {
		if got := metricValue(t, fams, x.name, "pipeline", "clicks-per-user"); got != x.want {
			t.Errorf("%s = %v, want %v", x.name, got, x.want)
		}
	}
	if metricValue(t, fams, "floe_store_requests_total", "kind", "put") == 0 || metricValue(t, fams, "floe_store_requests_total", "kind", "get") == 0 {
		t.Errorf("no store requests counted")
	}
	if ents, _ := os.ReadDir(mdir); len(ents) != 1 {
		t.Errorf("the metrics directory holds %d files; want only floe.prom (temporary files renamed)", len(ents))
	}

	// A run that cannot start still writes its exit code.
	os.RemoveAll(filepath.Join(dir, "state"))
	bad := strings.Replace(mustRead(t, spec), "testdata/events", "testdata/no-such-dir", 1)
	os.WriteFile(spec, []byte(bad), 0o644)
	if code, _, _ := floe("run", spec, "--metrics-file", mfile); code != 2 {
		t.Fatalf("run over a missing source: code %d", code)
	}
	fams = parseMetrics(t, mfile)
	if got := metricValue(t, fams, "floe_run_exit_code"); got != 2 {
		t.Fatalf("floe_run_exit_code = %v after a failed run, want 2", got)
	}
	if _, ok := fams["floe_head_epoch"]; ok {
		t.Fatalf("a pipeline with no head reports floe_head_epoch")
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// screen is a minimal terminal: width columns, automatic wrap at the right
// margin, "\r", "\n" and ESC [ K (erase to end of line). It is what a real
// terminal does with the bytes the progress line writes.
type screen struct {
	width    int
	lines    [][]rune
	row, col int
}

func (s *screen) Write(b []byte) (int, error) {
	r := []rune(string(b))
	for i := 0; i < len(r); i++ {
		for len(s.lines) <= s.row {
			s.lines = append(s.lines, nil)
		}
		switch c := r[i]; {
		case c == '\r':
			s.col = 0
		case c == '\n':
			s.row, s.col = s.row+1, 0
		case c == 0x1b && i+2 < len(r) && r[i+1] == '[' && r[i+2] == 'K':
			if s.col < len(s.lines[s.row]) {
				s.lines[s.row] = s.lines[s.row][:s.col]
			}
			i += 2
		default:
			if s.col == s.width { // the terminal wraps: the rest goes on a new line
				s.row, s.col = s.row+1, 0
				for len(s.lines) <= s.row {
					s.lines = append(s.lines, nil)
				}
			}
			for len(s.lines[s.row]) <= s.col {
				s.lines[s.row] = append(s.lines[s.row], ' ')
			}
			s.lines[s.row][s.col] = c
			s.col++
		}
	}
	return len(b), nil
}

func (s *screen) text() []string {
	var out []string
	for _, l := range s.lines {
		out = append(out, strings.TrimRight(string(l), " "))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// TestProgressLine renders the progress of a long run into an 80-column
// screen: the line never wraps, a shorter line leaves nothing of a longer
// one behind, log lines land above it, and finish leaves an empty line.
func TestProgressLine(t *testing.T) {
	scr := &screen{width: 80}
	pl := newProgressLine(scr, func() int { return 80 }, 0)
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	pl.now = func() time.Time { return start.Add(90 * time.Second) }
	wm := time.Date(2024, 1, 1, 0, 2, 10, 0, time.UTC).UnixMicro()
	pl.update(engine.Progress{Epoch: 123456, FilesDone: 12345, FilesPending: 99999, RowsDone: 987654321, Watermark: wm, Started: start})
	if got := scr.text(); len(got) != 1 || len([]rune(got[0])) > 79 || !strings.HasPrefix(got[0], "epoch 123456  files 12345/99999") {
		t.Fatalf("long progress: %q", got)
	}
	pl.update(engine.Progress{Epoch: 7, FilesDone: 1, FilesPending: 2, RowsDone: 5, Watermark: wm, Started: start})
	fmt.Fprintf(pl, "level=WARN msg=%q\n", strings.Repeat("x", 30))
	pl.update(engine.Progress{Epoch: 8, FilesDone: 2, FilesPending: 2, RowsDone: 9, Watermark: wm, Started: start})
	got := scr.text()
	if len(got) != 2 || !strings.HasPrefix(got[0], "level=WARN") || got[1] != "epoch 8  files 2/2  rows 9 (0/s)  wm 2024-01-01T00:02:10Z" {
		t.Fatalf("screen after a log line and a shorter progress line:\n%s", strings.Join(got, "\n"))
	}
	pl.finish()
	if got := scr.text(); len(got) != 1 || scr.col != 0 || scr.row != 1 {
		t.Fatalf("after finish: %q, cursor %d,%d", got, scr.row, scr.col)
	}

	// --trigger: once caught up, a waiting line, not a blank screen.
	scr = &screen{width: 40}
	pl = newProgressLine(scr, func() int { return 40 }, 10*time.Second)
	pl.now = func() time.Time { return start }
	pl.update(engine.Progress{Epoch: 4, FilesDone: 6, FilesPending: 6, RowsDone: 2000, Watermark: wm, Started: start})
	pl.now = func() time.Time { return start.Add(12 * time.Second) }
	pl.mu.Lock()
	pl.draw() // what the ticker does every second
	pl.mu.Unlock()
	if got := scr.text(); len(got) != 1 || !strings.HasPrefix(got[0], "epoch 4  caught up, idle 12s") || len([]rune(got[0])) > 39 {
		t.Fatalf("trigger mode, caught up: %q", got)
	}
	pl.update(engine.Progress{Epoch: 5, FilesDone: 6, FilesPending: 9, RowsDone: 2000, Watermark: wm, Started: start})
	if got := scr.text(); len(got) != 1 || !strings.HasPrefix(got[0], "epoch 5  files 6/9") {
		t.Fatalf("trigger mode, new files: %q", got)
	}
}

// failingList makes every List of a store fail transiently and calls
// during before each failure (a test's look at the world mid-outage).
type failingList struct {
	store.Store
	during func()
}

func (f *failingList) List(ctx context.Context, prefix string) ([]store.ObjectInfo, error) {
	f.during()
	return nil, fmt.Errorf("list %s: connection refused: %w", prefix, engine.ErrTransient)
}

// TestCLIMetricsFileAfterFailedAttempt: a --trigger worker whose attempts
// fail (the source cannot be listed: a transient storage error) writes its
// metrics file after each failed attempt, so node_exporter's textfile
// collector shows floe_run_consecutive_failures > 0 during the outage, not
// only when the worker gives up.
func TestCLIMetricsFileAfterFailedAttempt(t *testing.T) {
	spec, dir := sampleSpec(t)
	if code, out, e := floe("run", spec); code != 0 {
		t.Fatalf("run: %s%s", out, e)
	}
	mfile := filepath.Join(dir, "floe.prom")
	var (
		mu       sync.Mutex
		seen     []float64 // floe_run_consecutive_failures in the file at each failing call
		restarts []float64
	)
	look := func() {
		data, err := os.ReadFile(mfile)
		if err != nil {
			return // not written yet
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(bytes.NewReader(data))
		if err != nil {
			t.Errorf("metrics file does not parse: %v\n%s", err, data)
			return
		}
		mu.Lock()
		seen = append(seen, gauge(fams, "floe_run_consecutive_failures"))
		restarts = append(restarts, gauge(fams, "floe_run_restarts_total"))
		mu.Unlock()
	}
	testWrapStore = func(name string, s store.Store) store.Store {
		if name != "source" {
			return s
		}
		return &failingList{Store: s, during: look}
	}
	defer func() { testWrapStore = nil }()
	code, out, errOut := floe("run", spec, "--trigger", "50ms", "--max-restarts", "2", "--restart-backoff", "20ms",
		"--retry-budget", "30ms", "--metrics-file", mfile)
	if code != 2 || !strings.Contains(errOut, "giving up after 3 consecutive failed attempts") {
		t.Fatalf("worker: code %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	maxSeen := -1.0
	for _, v := range seen {
		maxSeen = max(maxSeen, v)
	}
	// The third attempt's calls find two failures recorded.
	if maxSeen != 2 || restarts[len(restarts)-1] != 2 {
		t.Fatalf("floe_run_consecutive_failures in the file while the worker ran: %v (restarts %v); want 1, then 2 before it gave up", seen, restarts)
	}
	fams := parseMetrics(t, mfile)
	if got := metricValue(t, fams, "floe_run_consecutive_failures"); got != 3 {
		t.Fatalf("at the end: floe_run_consecutive_failures = %v, want 3", got)
	}
}
