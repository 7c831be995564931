package iceberg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/floe-dev/floe/store"
)

// raceScenario: writers Tables (separate Opens, as separate processes would
// be) publish epochs 1..epochs in order concurrently, plus same writers
// hammering one extra epoch; a maintainer expires snapshots meanwhile. Each
// epoch's rows must be in the table exactly once.
func raceScenario(t *testing.T, open func(t *testing.T) (store.Store, string), readBack func(t *testing.T, tbl *Table) []string) {
	ctx := context.Background()
	inner, loc := open(t)
	st := &conflictCounter{Store: inner}
	const writers, epochs = 3, 8
	var want []row
	files := map[int64][]DataFile{}
	for e := int64(1); e <= epochs+1; e++ {
		f, rows := writeEpoch(t, st, e, 1, 3)
		files[e] = f
		want = append(want, rows...)
	}
	opts := Options{PartitionBy: "day(window_start)", MaxAttempts: 100}
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers+1)
	for w := range writers {
		tbl := mustOpen(t, st, loc, opts)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := int64(1); e <= epochs; e++ {
				if err := tbl.Publish(ctx, "p", e, map[string]string{"attempt": fmt.Sprintf("w%d", w)}, files[e]); err != nil {
					errs <- fmt.Errorf("writer %d epoch %d: %w", w, e, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// All writers race on the same epoch at once.
	start := make(chan struct{})
	for w := range writers {
		tbl := mustOpen(t, st, loc, opts)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := tbl.Publish(ctx, "p", epochs+1, map[string]string{"attempt": fmt.Sprintf("w%d", w)}, files[epochs+1]); err != nil {
				errs <- fmt.Errorf("writer %d epoch %d: %w", w, epochs+1, err)
			}
		}()
	}
	// And a maintainer commits expiries meanwhile (default grace: it
	// deletes nothing young).
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-start
		tbl := mustOpen(t, st, loc, opts)
		if _, err := tbl.Maintain(ctx, MaintainOptions{RetainSnapshots: 3}); err != nil {
			errs <- fmt.Errorf("maintain: %w", err)
		}
	}()
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d metadata creates lost a race", st.lost.Load())
	tbl := mustOpen(t, st, loc, opts)
	if d := diffRows(readBack(t, tbl), rowStrings(want)); d != "" {
		t.Fatal(d)
	}
	if got, err := tbl.PublishedEpoch(ctx, "p"); err != nil || got != epochs+1 {
		t.Fatalf("PublishedEpoch = %d, %v", got, err)
	}
	// Each epoch is in exactly one snapshot (of those not expired).
	cur := currentTable(t, tbl)
	seen := map[string]int{}
	for _, s := range cur.Metadata().Snapshots() {
		seen[s.Summary.Properties["floe.epoch"]]++
	}
	for e, n := range seen {
		if n != 1 {
			t.Fatalf("epoch %s in %d snapshots", e, n)
		}
	}
}

// conflictCounter counts metadata creates that lost their precondition.
type conflictCounter struct {
	store.Store
	lost atomic.Int64
}

func (c *conflictCounter) Put(ctx context.Context, key string, data []byte, opts store.PutOptions) (string, error) {
	etag, err := c.Store.Put(ctx, key, data, opts)
	if errors.Is(err, store.ErrPrecondition) {
		c.lost.Add(1)
	}
	return etag, err
}

func TestRaceFile(t *testing.T) {
	var ft fileTable
	raceScenario(t, func(t *testing.T) (store.Store, string) {
		ft = newFileTable(t)
		return ft.st, ft.loc
	}, func(t *testing.T, _ *Table) []string { return ft.read(t) })
}

// TestFaultSweep fails the i-th store call of a run publishing epochs 1..3,
// for every i and each fault mode (a lost response, a failed call, a crash
// before or after the call applies), then publishes 1..3 again without
// faults, as the engine's next run would. The table always holds each
// epoch's rows exactly once, and nothing is left that Maintain cannot read.
func TestFaultSweep(t *testing.T) {
	ctx := context.Background()
	modes := []store.FaultMode{store.FailAfterApply, store.Fail, store.CrashBefore, store.CrashAfter}
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			runs := 0
			for i := 0; ; i++ {
				ft := newFileTable(t)
				var want []row
				files := map[int64][]DataFile{}
				for e := int64(1); e <= 3; e++ {
					f, rows := writeEpoch(t, ft.st, e, int(e%2)+1, 2)
					files[e] = f
					want = append(want, rows...)
				}
				faulty := store.NewFaulty(ft.st, store.FaultPlan{Faults: []store.Fault{{At: i, Mode: mode}}})
				tbl, err := Open(ctx, faulty, ft.loc, Options{Schema: testSchema, PartitionBy: "day(window_start)", MaxAttempts: 3})
				if err == nil {
					for e := int64(1); e <= 3; e++ {
						if err := tbl.Publish(ctx, "p", e, nil, files[e]); err != nil {
							if !errors.Is(err, store.ErrTransient) && !errors.Is(err, store.ErrCrashed) && !errors.Is(err, ErrCommitUnknown) {
								t.Fatalf("fault at call %d: publish %d: unexpected error: %v", i, e, err)
							}
							break // the run stops, as the engine would
						}
					}
				}
				calls := faulty.Calls()
				// The next run, without faults.
				tbl = mustOpen(t, ft.st, ft.loc, Options{PartitionBy: "day(window_start)"})
				for e := int64(1); e <= 3; e++ {
					if err := tbl.Publish(ctx, "p", e, nil, files[e]); err != nil {
						t.Fatalf("fault at call %d: recovery publish %d: %v", i, e, err)
					}
				}
				if d := diffRows(ft.read(t), rowStrings(want)); d != "" {
					t.Fatalf("fault %s at call %d (log %s):\n%s", mode, i, strings.Join(faulty.Log(), "; "), d)
				}
				if _, err := tbl.Maintain(ctx, MaintainOptions{RetainSnapshots: 1, MinAge: -1}); err != nil {
					t.Fatalf("fault at call %d: maintain: %v", i, err)
				}
				if d := diffRows(ft.read(t), rowStrings(want)); d != "" {
					t.Fatalf("fault %s at call %d, after maintain:\n%s", mode, i, d)
				}
				runs++
				if calls <= i { // the fault never fired: every call is swept
					break
				}
			}
			t.Logf("%s: swept %d fault positions", mode, runs)
		})
	}
}

// TestLostResponseResolved: the metadata put applies but its response is
// lost; reading it back resolves the commit as ours, without a second
// commit. When the read-back fails too, the outcome is unknown and the next
// attempt resolves it through the epoch marker.
func TestLostResponseResolved(t *testing.T) {
	ctx := context.Background()
	for _, readFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("readback-fails=%v", readFails), func(t *testing.T) {
			ft := newFileTable(t)
			f1, r1 := writeEpoch(t, ft.st, 1, 1, 2)
			f2, r2 := writeEpoch(t, ft.st, 2, 2, 2)
			plan := store.FaultPlan{Faults: []store.Fault{{Match: store.Match{Op: store.OpPut, KeyContains: "metadata/v3.metadata.json"}, Mode: store.FailAfterApply}}}
			if readFails {
				plan.Faults = append(plan.Faults, store.Fault{Match: store.Match{Op: store.OpGet, KeyContains: "metadata/v3.metadata.json"}, Mode: store.Fail})
			}
			faulty := store.NewFaulty(ft.st, plan)
			tbl := mustOpen(t, faulty, ft.loc, Options{})
			if err := tbl.Publish(ctx, "p", 1, nil, f1); err != nil {
				t.Fatal(err)
			}
			if err := tbl.Publish(ctx, "p", 2, nil, f2); err != nil {
				t.Fatalf("publish with a lost response: %v", err)
			}
			if got := localHead(t, ft.dir); !strings.HasSuffix(got, "/metadata/v3.metadata.json") {
				t.Fatalf("head %s, want v3: the lost-response commit was applied twice", got)
			}
			if d := diffRows(ft.read(t), rowStrings(append(r1, r2...))); d != "" {
				t.Fatal(d)
			}
			t.Logf("store calls: %s", strings.Join(faulty.Log(), "; "))
		})
	}
}
