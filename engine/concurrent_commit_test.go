package engine_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/epoch"
	"github.com/floe-dev/floe/store"
)

// hookStore calls before() once, just before the first Put of key.
type hookStore struct {
	store.Store
	key    string
	once   sync.Once
	before func()
}

func (h *hookStore) Put(ctx context.Context, key string, data []byte, opts store.PutOptions) (string, error) {
	if key == h.key {
		h.once.Do(h.before)
	}
	return h.Store.Put(ctx, key, data, opts)
}

// TestLostPointerSwapAdoptsNoForeignHead: a run whose pointer swap lost to
// another run's must neither emit that run's rows again nor delete its
// outputs. The case: run A creates the manifest of
// epoch 1 and is slow to swap _latest.json. Run B (an overlapping cron run)
// rolls the pointer forward over A's manifest and commits epochs 2 and 3.
// A's swap then loses, Attempt.Commit finds its manifest on the chain and
// returns c.Recover() = head epoch 3, which the engine adopts while its
// in-memory seen set, output log and state are still those of epoch 1.
// A then re-processes B's files as epochs 4 and 5 (emitting their rows a
// second time) and its end-of-run sink cleanup deletes B's committed outputs
// of epochs 2 and 3 (they are not in A's stale output log).
func TestLostPointerSwapAdoptsNoForeignHead(t *testing.T) {
	e := fileEnv(t)
	e.put(t, "a.jsonl", jsonl(ev("00:00:10", "u1", 1)))
	e.put(t, "b.jsonl", jsonl(ev("00:00:20", "u2", 2)))
	e.put(t, "c.jsonl", jsonl(ev("00:00:30", "u3", 3)))
	p := e.pipeline(t, `
name: t
source: {type: files, url: "{{source}}", format: jsonl, max_files_per_epoch: 1,
         schema: {event_time: timestamp, user_id: string, page: string, bytes: int64},
         event_time: event_time}
operators:
  - filter: "bytes > 0"
sink:  {type: files, url: "{{sink}}", format: parquet}
state: {url: "{{state}}", parallelism: 1}
`)
	var resB *engine.Result
	_, errA := engine.Run(context.Background(), p, engine.Options{WrapStore: func(name string, s store.Store) store.Store {
		if name != "state" {
			return s
		}
		return &hookStore{Store: s, key: "_latest.json", before: func() {
			resB = run(t, p, engine.Options{})
		}}
	}})
	// A's epoch 1 is committed (B rolled forward over it), but B has moved on:
	// A must stop rather than continue from its stale in-memory state.
	if !errors.Is(errA, epoch.ErrSuperseded) {
		t.Fatalf("run A: %v; want ErrSuperseded", errA)
	}
	t.Logf("run A: %v; run B: epochs %d (first %d, last %d, files %d)", errA, resB.Epochs, resB.FirstEpoch, resB.LastEpoch, resB.Files)

	ctx := context.Background()
	st, err := store.Open(ctx, e.state+"/t")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sink, err := store.Open(ctx, e.sink)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	c := epoch.NewCommitter(st, sink, "t", nil)
	head, err := c.Peek(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := c.Chain(ctx, head, 100)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	var filesIn int
	for _, m := range chain {
		filesIn++
		for _, o := range m.Outputs {
			if _, err := c.ReadOutput(ctx, o); err != nil {
				problems = append(problems, "committed output of epoch "+o.Path+": "+err.Error())
			}
		}
	}
	if filesIn != 3 {
		problems = append(problems, "3 input files were committed as "+strconv.Itoa(filesIn)+" epochs (files processed twice)")
	}
	if len(problems) > 0 {
		t.Fatalf("head epoch %d:\n%s", head.Epoch(), strings.Join(problems, "\n"))
	}
}
