package manifest

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const (
	attemptA = "0f8fad5b-d9cb-469f-a165-70867728950e"
	attemptB = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
)

var created = time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)

func validLatest() *Latest { return NewLatest(3, 41, attemptA) }

func validGeneration() *Generation {
	return &Generation{
		FormatVersion:  FormatVersion,
		Pipeline:       "clicks-per-user",
		Generation:     3,
		Parent:         &Ref{Generation: 2, Epoch: 40},
		Parallelism:    2,
		MaxParallelism: 128,
		Plan: []OpPlan{
			{ID: "window-0", Kind: "window", StateSchema: "sha256:aa"},
			{ID: "dedup_1", Kind: "dedup", StateSchema: "sha256:bb"},
		},
		PlanHash:  "sha256:cc",
		Attempt:   attemptB,
		CreatedAt: created,
	}
}

func stateRef(op string, subtask, lo, hi int) FileRef {
	r := NewFileRef(StatePath(3, 41, attemptA, op, subtask), []byte(op+string(rune('0'+subtask))))
	r.Rows = 10
	r.Subtask, r.KeyGroupLo, r.KeyGroupHi = subtask, lo, hi
	return r
}

func validManifest() *Manifest {
	out := NewFileRef("dt=2026-11-29/"+OutputName(3, 41, 1, attemptA, "parquet"), []byte("out"))
	out.Rows, out.Subtask = 5, 1
	late := NewFileRef("late/"+OutputName(3, 41, 0, attemptA, "parquet"), []byte("late"))
	late.Kind, late.Rows = SideOutputLate, 2
	seg := NewFileRef(SourcePath(3, 40, attemptB, "seen-000001.jsonl"), []byte("a\nb\n"))
	return &Manifest{
		FormatVersion: FormatVersion,
		Pipeline:      "clicks-per-user",
		Generation:    3,
		Epoch:         41,
		Attempt:       attemptA,
		Parent:        &Ref{Generation: 3, Epoch: 40},
		CreatedAt:     created,
		Watermark:     1_764_410_000_000_000,
		Source: SourceState{
			Inline:   []string{"events/2026/11/29/a.jsonl", "events/2026/11/29/b.jsonl"},
			Segments: []FileRef{seg},
			Count:    4,
			Inputs: map[string]InputState{
				"events": {MaxEventTime: 1_764_410_005_000_000, LastActive: created},
			},
		},
		Counters: Counters{FilesIn: 4, RowsIn: 100, RowsOut: 5, RowsLate: 2, RowsRejected: 1, RowsFiltered: 3, Windows: 5},
		Operators: []OperatorState{
			{ID: "window-0", EmittedThrough: 1_764_409_940_000_000, Files: []FileRef{
				stateRef("window-0", 0, 0, 64), stateRef("window-0", 1, 64, 128),
			}},
			{ID: "dedup_1", EmittedThrough: NoWatermark, Files: []FileRef{
				stateRef("dedup_1", 0, 0, 64), stateRef("dedup_1", 1, 64, 128),
			}},
		},
		Outputs:     []FileRef{out},
		SideOutputs: []FileRef{late},
	}
}

// wantFieldErr fails unless err is an *Error wrapping ErrCorrupt whose
// Field is field and whose message contains every fragment.
func wantFieldErr(t *testing.T, err error, field string, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want one for field %q", field)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("error %q does not wrap ErrCorrupt", err)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %q is not an *Error", err)
	}
	if e.Field != field {
		t.Errorf("error %q: field %q, want %q", err, e.Field, field)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not contain %q", err, f)
		}
	}
}
