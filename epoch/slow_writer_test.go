package epoch_test

import (
	"testing"
	"time"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
)

// TestGraceKeepsSlowWriterState: writer A writes the state of epoch
// 2 and then stalls (GC pause, suspended VM, partition) for longer than the
// orphan grace. An overlapping run R recovers head = 1 and runs retention:
// A's files belong to an epoch newer than the head and are older than the
// grace. Retention must keep them (DESIGN invariant 6: it never deletes
// anything of an epoch newer than _latest.json): when A resumes and its
// manifest create succeeds, epoch 2 references state that is still there
// and later restores work.
func TestGraceKeepsSlowWriterState(t *testing.T) {
	ctx := ctxT(t)
	su, ku := fileBackend().urls(t)
	st, sink := open(t, su), open(t, ku)
	d := newDriver(7)
	if err := d.run(ctx, t, d.committer(st, sink), 1); err != nil {
		t.Fatal(err)
	}

	// Writer A: begins epoch 2 and writes its files.
	cA := d.committer(st, sink)
	headA, err := cA.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	state, err := restore(ctx, cA, headA)
	if err != nil {
		t.Fatal(err)
	}
	att := cA.Begin(headA, headA.Manifest.Generation)
	op := manifest.OperatorState{ID: testOp, EmittedThrough: manifest.NoWatermark}
	for s := 0; s < d.parallelism; s++ {
		lo, hi := s*testMaxPar/d.parallelism, (s+1)*testMaxPar/d.parallelism
		data, rows := encodeState(t, state, lo, hi)
		ref, err := att.WriteState(ctx, testOp, s, lo, hi, data, rows)
		if err != nil {
			t.Fatal(err)
		}
		op.Files = append(op.Files, ref)
	}

	// A stalls; R runs retention 20 minutes later with the default 15m grace.
	cR := epoch.NewCommitter(st, sink, "test", nil)
	cR.Now = func() time.Time { return time.Now().Add(20 * time.Minute) }
	headR, err := cR.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gst, err := cR.Retain(ctx, headR, epoch.GCOptions{Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("retention by R: %+v", gst)

	// A resumes and commits.
	m := &manifest.Manifest{Watermark: 2000, Operators: []manifest.OperatorState{op}}
	m.Source.Inline = append(prevInline(headA), "in-0002")
	m.Source.Count = int64(len(m.Source.Inline))
	if _, err := att.Commit(ctx, m); err != nil {
		t.Logf("A's commit refused (the fix): %v", err)
		return
	}
	c := epoch.NewCommitter(st, sink, "test", nil)
	head, err := c.Recover(ctx)
	if err != nil {
		t.Fatalf("recover after A committed: %v", err)
	}
	if _, err := restore(ctx, c, head); err != nil {
		t.Fatalf("A committed epoch %d but its state was deleted by R's retention: %v", head.Epoch(), err)
	}
}

// TestStaleHeadRetentionKeepsLiveChain: the retainer is the slow one.
// R recovers head = 1 and stalls for longer than the grace; meanwhile writer
// A commits epochs 2..4. R resumes and runs retention with its stale head:
// every manifest and state file of epochs 2..4 is "newer than the head and
// older than the grace", and must be kept, being the committed chain
// _latest.json points at.
func TestStaleHeadRetentionKeepsLiveChain(t *testing.T) {
	ctx := ctxT(t)
	su, ku := fileBackend().urls(t)
	st, sink := open(t, su), open(t, ku)
	d := newDriver(8)
	if err := d.run(ctx, t, d.committer(st, sink), 1); err != nil {
		t.Fatal(err)
	}
	cR := epoch.NewCommitter(st, sink, "test", nil)
	headR, err := cR.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.run(ctx, t, d.committer(st, sink), 4); err != nil { // A, while R stalls
		t.Fatal(err)
	}
	cR.Now = func() time.Time { return time.Now().Add(20 * time.Minute) }
	gst, err := cR.Retain(ctx, headR, epoch.GCOptions{Keep: 3, SkipSink: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("retention by R with stale head %d: %+v", headR.Epoch(), gst)
	c := epoch.NewCommitter(st, sink, "test", nil)
	head, err := c.Recover(ctx)
	if err != nil {
		t.Fatalf("committed chain damaged by stale-head retention: %v", err)
	}
	if _, err := restore(ctx, c, head); err != nil {
		t.Fatalf("committed state damaged by stale-head retention: %v", err)
	}
}
