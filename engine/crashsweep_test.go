package engine_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// TestCrashSweepEveryStore crashes a run at every call it makes to each of
// its stores in turn, chosen by the name Options.WrapStore gives it (state,
// sink, source, late, rejected), then runs again: the committed outputs,
// late rows and counters equal those of an uninterrupted run, and verify
// finds nothing wrong.
func TestCrashSweepEveryStore(t *testing.T) {
	gen := datagen.Options{Rows: 1200, Files: 4, Users: 12, Span: 8 * time.Minute, Seed: 11,
		OutOfOrder: 10 * time.Second, LateFraction: 0.05, MalformedFraction: 0.02}
	tmpl := strings.Replace(windowSpec, "max_files_per_epoch: 1,", `max_files_per_epoch: 2, late_url: "{{late}}", rejected_url: "{{rejected}}",`, 1)
	newEnv := func(t *testing.T) (*env, *spec.Pipeline) {
		e := fileEnv(t)
		e.rejected = fileURL(filepath.Join(t.TempDir(), "rejected"))
		genData(t, e, gen)
		p := e.pipeline(t, strings.Replace(tmpl, "{{rejected}}", e.rejected, 1))
		return e, p
	}
	re, ref := newEnv(t)
	want := run(t, ref, engine.Options{Drain: true})
	wantRows := committedRows(t, ref)
	wantLate := len(listKeys(t, re.late))
	if want.RowsLate == 0 || want.RowsRejected == 0 || wantLate == 0 {
		t.Fatalf("reference run has no late (%d) or rejected (%d) rows: the sweep would not exercise those stores", want.RowsLate, want.RowsRejected)
	}
	for _, name := range []string{"state", "sink", "source", "late", "rejected"} {
		t.Run(name, func(t *testing.T) {
			for at := 0; ; at++ {
				e, p := newEnv(t)
				calls := 0
				_, err := engine.Run(context.Background(), p, engine.Options{Drain: true, Retry: store.RetryPolicy{MaxAttempts: 1},
					WrapStore: func(n string, s store.Store) store.Store {
						if n != name {
							return s
						}
						calls++
						return store.NewFaulty(s, store.FaultPlan{Faults: []store.Fault{{At: at, Mode: store.CrashAfter}}})
					}})
				if calls == 0 {
					t.Fatalf("no store named %q was opened", name)
				}
				if err == nil {
					if at == 0 {
						t.Fatalf("no crash at %s call 0: the sweep exercises nothing", name)
					}
					t.Logf("%s: crashed at each of %d calls", name, at)
					break
				}
				if !errors.Is(err, store.ErrCrashed) {
					t.Fatalf("crash at %s call %d: %v", name, at, err)
				}
				res := run(t, p, engine.Options{Drain: true})
				if got := committedRows(t, p); !reflect.DeepEqual(got, wantRows) {
					t.Fatalf("crash at %s call %d: %d rows, want %d", name, at, len(got), len(wantRows))
				}
				st, err := engine.ReadStatus(context.Background(), p)
				if err != nil {
					t.Fatal(err)
				}
				if c := st.Counters; c.RowsLate != want.RowsLate || c.RowsRejected != want.RowsRejected {
					t.Fatalf("crash at %s call %d: late %d rejected %d, want %d and %d (last run %+v)", name, at,
						c.RowsLate, c.RowsRejected, want.RowsLate, want.RowsRejected, res)
				}
				if n := len(listKeys(t, e.late)); n != wantLate {
					t.Fatalf("crash at %s call %d: %d late files, want %d", name, at, n, wantLate)
				}
				rep, err := engine.Verify(context.Background(), p)
				if err != nil || len(rep.Problems) > 0 {
					t.Fatalf("crash at %s call %d: verify: %v %v", name, at, err, rep.Problems)
				}
			}
		})
	}
}
