package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/datagen"
)

// TestLogLineEqualsHistory: an epoch's log line states the figures floe
// history shows for it (one definition each), and the commit's own
// requests apart.
func TestLogLineEqualsHistory(t *testing.T) {
	for _, newEnv := range []func(testing.TB) *env{fileEnv, s3Env} {
		e := newEnv(t)
		genData(t, e, datagen.Options{Rows: 400, Files: 4, Users: 5, Seed: 3, MalformedFraction: 0.05})
		p := e.pipeline(t, windowSpec)
		var buf bytes.Buffer
		run(t, p, engine.Options{Log: slog.New(slog.NewJSONHandler(&buf, nil))})
		lines := map[int64]map[string]any{}
		for _, l := range bytes.Split(buf.Bytes(), []byte("\n")) {
			var rec map[string]any
			if json.Unmarshal(l, &rec) == nil && rec["msg"] == "epoch committed" {
				lines[int64(rec["epoch"].(float64))] = rec
			}
		}
		hist, err := engine.History(context.Background(), p, 0)
		must(t, err)
		if len(lines) == 0 || len(lines) != len(hist) {
			t.Fatalf("%s: %d log lines, %d history rows", e.name, len(lines), len(hist))
		}
		for _, h := range hist {
			l := lines[h.Epoch]
			for key, want := range map[string]*int64{"files": h.Files, "rows_in": h.RowsIn, "rows_out": h.RowsOut, "late": h.RowsLate, "rejected": h.RowsRejected,
				"bytes_in": h.BytesIn, "bytes_written": h.BytesWritten, "gets": h.Gets, "puts": h.Puts, "lists": h.Lists, "deletes": h.Deletes, "retries": h.Retries} {
				got, ok := l[key].(float64)
				if !ok || want == nil || int64(got) != *want {
					t.Errorf("%s epoch %d: log %s=%v, history %v", e.name, h.Epoch, key, l[key], deref(want))
				}
			}
			if p, ok := l["commit_puts"].(float64); !ok || p < 2 {
				t.Errorf("%s epoch %d: commit_puts=%v; the manifest and the pointer are two puts at least", e.name, h.Epoch, l["commit_puts"])
			}
		}
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
