package operators

import (
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The state an arrival-numbered operator writes for an epoch must not
// depend on whether it was restored at the epoch's start or kept running:
// several workers redo a share under one attempt, and an object written
// again must have the same bytes. A running operator counts every row it
// was offered (late rows, null keys and other subtasks' rows of a batch
// too); a restored one from the highest number it restored. BeginEpoch
// numbers the epoch's rows alike in both. Each test fails without the
// BeginEpoch calls (the upserts' seq columns differ).

// arrivalEpochs runs epoch 1 on a fresh operator, snapshots it, then runs
// epoch 2 on it and on a copy restored from the snapshot, and returns both
// epoch-2 deltas' upsert rows.
func arrivalEpochs(t *testing.T, newOp func() Stateful, epoch1, epoch2 func(op Stateful)) (live, restored []string) {
	t.Helper()
	run := newOp()
	if a, ok := run.(ArrivalOrdered); ok {
		a.BeginEpoch(1)
	}
	epoch1(run)
	base, err := run.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer release(base...)
	back := newOp()
	if err := back.Restore(base, 0, 128, run.Watermark()); err != nil {
		t.Fatal(err)
	}
	delta := func(op Stateful) []string {
		if a, ok := op.(ArrivalOrdered); ok {
			a.BeginEpoch(2)
		}
		epoch2(op)
		ups, tombs, err := op.SnapshotDelta()
		if err != nil {
			t.Fatal(err)
		}
		defer release(append(ups, tombs...)...)
		var out []string
		for _, b := range ups {
			out = append(out, rowsOf(b)...)
		}
		return out
	}
	return delta(run), delta(back)
}

func process(t *testing.T, op Stateful, side int, rec arrow.RecordBatch, sel []int32) {
	t.Helper()
	late, err := op.ProcessInput(side, rec, sel)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	release(late)
}

func advance(t *testing.T, op Stateful, wm int64) {
	t.Helper()
	out, err := op.Advance(wm)
	if err != nil {
		t.Fatal(err)
	}
	release(out)
}

func TestJoinRestoredNumbersEpochAlike(t *testing.T) {
	sec := int64(time.Second / time.Microsecond)
	spec := intervalSpec(InnerJoin, -10*time.Second, 10*time.Second, 0)
	newOp := func() Stateful { return newJoin(t, spec) }
	mem := memory.DefaultAllocator
	live, restored := arrivalEpochs(t, newOp, func(op Stateful) {
		// The batch's last rows are not held: a null key, and a row of
		// another subtask (not selected).
		process(t, op, 0, joinBatch(t, mem, 0, jl(100*sec, "a", 1), jl(101*sec, "b", 2), jev{ts: 102 * sec, v: 3}, jl(103*sec, "c", 4)), []int32{0, 1, 2})
		process(t, op, 1, joinBatch(t, mem, 1, jr(100*sec, "a", "x"), jev{ts: 101 * sec, w: "y"}), nil)
		advance(t, op, 50*sec)
	}, func(op Stateful) {
		process(t, op, 0, joinBatch(t, mem, 0, jl(104*sec, "a", 5), jl(105*sec, "b", 6)), nil)
		process(t, op, 1, joinBatch(t, mem, 1, jr(104*sec, "b", "z")), nil)
		advance(t, op, 60*sec)
	})
	if len(live) == 0 || !slices.Equal(live, restored) {
		t.Fatalf("epoch 2's upserts differ between the running and the restored join:\nrunning:  %q\nrestored: %q", live, restored)
	}
}

func TestDedupRestoredNumbersEpochAlike(t *testing.T) {
	newOp := func() Stateful { return newDedupT(t, DedupSpec{Keep: KeepLast, Within: 100 * us}) }
	live, restored := arrivalEpochs(t, newOp, func(op Stateful) {
		process(t, op, 0, batch(t, row(10, "a", 1), row(11, "b", 2), row(12, "c", 3)), []int32{0, 1})
		advance(t, op, 5)
	}, func(op Stateful) {
		process(t, op, 0, batch(t, row(13, "a", 4), row(14, "d", 5)), nil)
		advance(t, op, 6)
	})
	if len(live) == 0 || !slices.Equal(live, restored) {
		t.Fatalf("epoch 2's upserts differ between the running and the restored dedup:\nrunning:  %q\nrestored: %q", live, restored)
	}
}

// Row identities with arrival numbers past 47 bits (epoch 32768 on) are
// checked for duplicates as pairs, not packed: distinct ones pass, a
// repeated one is found.
func TestDupPickLargeArrivalNumbers(t *testing.T) {
	big := EpochArrivalBase(40000)
	picks := [][]joinPick{
		{{row: 0, id: rowID{kg: 3, side: 0, seq: big}}, {row: 1, id: rowID{kg: 3, side: 1, seq: big}}},
		{{row: 0, id: rowID{kg: 3, side: 0, seq: big + 1}}, {row: 1, id: rowID{kg: 4, side: 0, seq: big}}},
	}
	if _, _, dup := dupPick(picks); dup {
		t.Fatal("distinct identities reported as a duplicate")
	}
	picks[1] = append(picks[1], joinPick{row: 2, id: rowID{kg: 3, side: 1, seq: big}})
	bi, p, dup := dupPick(picks)
	if !dup || bi != 1 || p.row != 2 {
		t.Fatalf("the repeated identity (key group 3, right, %d): got batch %d row %d dup %v", big, bi, p.row, dup)
	}
}
