package epoch_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/store"
)

// TestRetainChainOnly: retention of the chain only (GCOptions.ChainOnly)
// lists nothing and leaves exactly what a listing collection leaves after
// uninterrupted epochs (the retained manifests and their files, every
// retained epoch restorable); after a crash its orphans stay (only a
// listing finds them) until a listing collection removes them.
func TestRetainChainOnly(t *testing.T) {
	ctx := ctxT(t)
	b := fileBackend()
	su, ku := b.urls(t)
	st, sink := open(t, su), open(t, ku)
	cs := &countingStore{Store: st}
	d := newDriver(5)
	d.keep, d.chainOnly = 5, true
	c := d.committer(cs, sink)
	if err := d.run(ctx, t, c, 1); err != nil { // a new pipeline's recovery lists
		t.Fatal(err)
	}
	cs.reset()
	if err := d.run(ctx, t, c, 30); err != nil {
		t.Fatal(err)
	}
	if cs.lists != 0 {
		t.Fatalf("chain-only retention listed the state %d times", cs.lists)
	}
	objs, err := st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	// _latest.json + 1 generation + 5 manifests + 5 epochs x 2 state files,
	// as TestRetention's listing collections leave.
	if want := 1 + 1 + 5 + 5*d.parallelism; len(objs) != want {
		t.Fatalf("objects after chain-only retention = %d, want %d:\n%s", len(objs), want, keysOf(objs))
	}
	head, err := c.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := c.Chain(ctx, head, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) != 5 || chain[4].Epoch != 26 {
		t.Fatalf("retained chain has %d manifests ending at %d, want 5 ending at 26", len(chain), chain[len(chain)-1].Epoch)
	}
	for _, m := range chain {
		if _, err := restore(ctx, c, &epoch.Head{Manifest: m}); err != nil {
			t.Fatalf("restore of retained epoch %d: %v", m.Epoch, err)
		}
	}

	// A crash before the manifest of epoch 31: its state files and output
	// are orphans. Chain-only runs keep retaining (manifests stay at 5) but
	// cannot see them; a listing collection deletes them.
	f := store.NewFaulty(st, store.FaultPlan{Faults: []store.Fault{{
		Match: store.Match{Op: store.OpPut, KeyContains: manifest.ManifestFile}, Mode: store.CrashBefore}}})
	if err := d.run(ctx, t, d.committer(f, sink), 31); !isCrash(err) {
		t.Fatalf("crashing run: %v", err)
	}
	orphans := map[string]bool{}
	objs, _ = st.List(ctx, "gen=000001/epoch=0000000031/")
	for _, o := range objs {
		orphans[o.Key] = true
	}
	if len(orphans) == 0 {
		t.Fatal("the crashed attempt left no state file: the test tests nothing")
	}
	d.rng = rand.New(rand.NewPCG(5, 1000)) // another attempt UUID
	c = d.committer(st, sink)
	if err := d.run(ctx, t, c, 40); err != nil {
		t.Fatal(err)
	}
	objs, _ = st.List(ctx, "")
	left := 0
	for _, o := range objs {
		if orphans[o.Key] {
			left++
		}
	}
	if left != len(orphans) {
		t.Fatalf("%d of %d orphans left by chain-only retention, want all (it lists nothing)", left, len(orphans))
	}
	if want := 1 + 1 + 5 + 5*d.parallelism + len(orphans); len(objs) != want {
		t.Fatalf("objects = %d, want %d (retained + the orphans):\n%s", len(objs), want, keysOf(objs))
	}
	head, err = c.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Retain(ctx, head, epoch.GCOptions{Keep: d.keep}); err != nil {
		t.Fatal(err)
	}
	assertNoOrphans(t, ctx, st, sink)
}

// TestRetainChainOnlyShrink: when the kept count drops (retain_epochs
// lowered, an Iceberg table published), one chain-only collection walks
// past every epoch that left retention.
func TestRetainChainOnlyShrink(t *testing.T) {
	ctx := ctxT(t)
	b := fileBackend()
	su, ku := b.urls(t)
	st, sink := open(t, su), open(t, ku)
	d := newDriver(9)
	d.keep, d.chainOnly = 12, true
	c := d.committer(st, sink)
	if err := d.run(ctx, t, c, 20); err != nil {
		t.Fatal(err)
	}
	head, err := c.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gst, err := c.Retain(ctx, head, epoch.GCOptions{Keep: 2, ChainOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if gst.Manifests != 10 {
		t.Fatalf("deleted %d manifests, want 10 (12 kept -> 2)", gst.Manifests)
	}
	objs, _ := st.List(ctx, "")
	if want := 1 + 1 + 2 + 2*d.parallelism; len(objs) != want {
		t.Fatalf("objects = %d, want %d:\n%s", len(objs), want, keysOf(objs))
	}
}

func keysOf(objs []store.ObjectInfo) string {
	var b strings.Builder
	for _, o := range objs {
		fmt.Fprintln(&b, o.Key)
	}
	return b.String()
}

// afterRec records the start key of every listing.
type afterRec struct {
	store.Store
	afters []string
}

func (a *afterRec) List(ctx context.Context, prefix string) ([]store.ObjectInfo, error) {
	return a.ListAfter(ctx, prefix, "")
}

func (a *afterRec) ListAfter(ctx context.Context, prefix, after string) ([]store.ObjectInfo, error) {
	a.afters = append(a.afters, after)
	return store.ListAfter(ctx, a.Store, prefix, after)
}

// TestSweepFlatSideOutputs: a sweep of a flat side-output folder lists only
// the names after the last epoch it cannot judge (the lineage parent of
// the oldest retained epoch) and decides exactly as a sweep that lists
// everything: an orphan of a retained epoch goes, a file of an older epoch
// stays, one of an epoch newer than the head is kept for Settle.
func TestSweepFlatSideOutputs(t *testing.T) {
	for _, flat := range []bool{false, true} {
		t.Run(fmt.Sprintf("flat=%v", flat), func(t *testing.T) {
			ctx := ctxT(t)
			su, ku := fileBackend().urls(t)
			st, sink := open(t, su), open(t, ku)
			d := newDriver(3) // keep 3
			c := d.committer(st, sink)
			if err := d.run(ctx, t, c, 10); err != nil {
				t.Fatal(err)
			}
			side := &afterRec{Store: open(t, fileURL(t.TempDir()))}
			name := func(e int64) string {
				return "rej/" + manifest.OutputName(1, e, 0, "deadbeef-0000-4000-8000-000000000000", "jsonl")
			}
			for _, e := range []int64{2, 8, 11} {
				if _, err := side.Put(ctx, name(e), []byte("{}\n"), store.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			head, err := c.Recover(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sw, err := c.SweepSideOutputs(ctx, head, d.keep, []epoch.SideDir{{Name: "rejected", Store: side, Prefix: "rej/", Flat: flat}})
			if err != nil {
				t.Fatal(err)
			}
			wantAfter := ""
			if flat {
				wantAfter = "rej/part-g000001-e0000000007~" // retained 8, 9, 10
			}
			if len(side.afters) != 1 || side.afters[0] != wantAfter {
				t.Fatalf("listed after %q, want %q", side.afters, wantAfter)
			}
			objs, err := side.Store.List(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := keysOf(objs); got != name(2)+"\n"+name(11)+"\n" {
				t.Fatalf("left %q; want the undecidable epoch 2 and the in-flight epoch 11 (the orphan of epoch 8, the oldest retained, deleted)", got)
			}
			// Epoch 11 committed by another attempt: Settle deletes the file.
			att := c.Begin(head, head.Generation.Generation)
			m := &manifest.Manifest{Watermark: 11000, Source: head.Manifest.Source, Operators: head.Manifest.Operators}
			if _, err := att.Commit(ctx, m); err != nil {
				t.Fatal(err)
			}
			if err := sw.Settle(ctx, m); err != nil {
				t.Fatal(err)
			}
			if objs, _ := side.Store.List(ctx, ""); keysOf(objs) != name(2)+"\n" {
				t.Fatalf("after Settle: %q", keysOf(objs))
			}
		})
	}
}
