package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/store"
)

// overGraph: per bidder, each bid with the average, count and maximum of
// its price and the 3 bids of the bidder before it, in event-time order.
const overGraph = `
name: bidder-average
sources:
  bids:
    type: files
    url: "{{bids}}"
    format: jsonl
    schema: {auction: int64, bidder: int64, price: int64, ts: timestamp}
    event_time: ts
    max_files_per_epoch: 2
    watermark: {max_out_of_orderness: 2s}
stages:
  - name: last4
    input: bids
    over:
      key: [bidder]
      order_by: ts
      rows: 3
      aggregates: {avg_price: "avg(price)", n: "count()", max_price: "max(price)"}
    late_url: "{{late}}/over"
sinks:
  out: {input: last4, type: files, url: "{{sink}}", format: jsonl}
state: {url: "{{state}}", parallelism: 2}
`

type overBid struct {
	Auction, Bidder, Price int64
	TS                     time.Time
	order                  int // file, then line: the order floe reads them in
}

// overExpected computes overGraph's rows from auctionFiles(files) directly.
func overExpected(t *testing.T, files int) []string {
	t.Helper()
	data := auctionFiles(files)
	var bids []overBid
	for f := range files {
		for _, l := range strings.Split(strings.TrimSpace(string(data[fmt.Sprintf("bids/f-%03d.jsonl", f)])), "\n") {
			var b struct {
				Auction, Bidder, Price int64
				TS                     time.Time `json:"ts"`
			}
			if err := json.Unmarshal([]byte(l), &b); err != nil {
				t.Fatal(err)
			}
			bids = append(bids, overBid{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, TS: b.TS, order: len(bids)})
		}
	}
	slices.SortStableFunc(bids, func(a, b overBid) int { return a.TS.Compare(b.TS) })
	hist := map[int64][]int64{}
	var out []string
	for _, b := range bids {
		h := append(hist[b.Bidder], b.Price)
		hist[b.Bidder] = h
		frame := h[max(0, len(h)-4):]
		var sum, mx int64
		for _, p := range frame {
			sum += p
			mx = max(mx, p)
		}
		out = append(out, overLine(b.Auction, b.Bidder, b.Price, b.TS, float64(sum)/float64(len(frame)), int64(len(frame)), mx))
	}
	slices.Sort(out)
	return out
}

func overLine(auction, bidder, price int64, ts time.Time, avg float64, n, mx int64) string {
	return fmt.Sprintf("bidder=%d ts=%s auction=%d price=%d avg=%g n=%d max=%d", bidder, ts.UTC().Format(time.RFC3339Nano), auction, price, avg, n, mx)
}

// overSinkLines decodes overGraph's jsonl output, sorted.
func overSinkLines(t *testing.T, sinkURL string) []string {
	t.Helper()
	var out []string
	for _, l := range graphSinkLines(t, sinkURL) {
		var r struct {
			Auction, Bidder, Price int64
			TS                     time.Time `json:"ts"`
			Avg                    float64   `json:"avg_price"`
			N                      int64     `json:"n"`
			Max                    int64     `json:"max_price"`
		}
		d := json.NewDecoder(bytes.NewReader([]byte(l)))
		if err := d.Decode(&r); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		out = append(out, overLine(r.Auction, r.Bidder, r.Price, r.TS, r.Avg, r.N, r.Max))
	}
	slices.Sort(out)
	return out
}

// TestGraphOver runs a graph with an over stage (the rows-frame aggregate of
// Nexmark q6) uninterrupted, across rescales 2 -> 5 -> 1 -> 3, and after a
// crash at every state-store call: each equals the rows computed directly
// from the input.
func TestGraphOver(t *testing.T) {
	const files = 10
	want := overExpected(t, files)
	ref := newGraphEnv(t)
	ref.putAuctions(t, files)
	res := run(t, ref.pipelineFrom(t, overGraph), engine.Options{Drain: true})
	if res.RowsLate != 0 {
		t.Fatalf("%d late rows: the input's disorder is within max_out_of_orderness", res.RowsLate)
	}
	got := overSinkLines(t, ref.sink)
	if len(want) < 100 || !reflect.DeepEqual(got, want) {
		t.Fatalf("over stage: %d rows, want %d\n%s", len(got), len(want), diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
	// floe replay --verify of every epoch, at the recorded parallelism and
	// at 3: the over stage restores from its parent's state and emits the
	// same rows.
	rp := ref.pipelineFrom(t, overGraph)
	for ep := res.FirstEpoch; ep <= res.LastEpoch; ep++ {
		for _, par := range []int{0, 3} {
			v, err := engine.VerifyReplay(context.Background(), rp, engine.ReplayOptions{Epoch: ep, Parallelism: par})
			if err != nil || !v.Identical() {
				t.Fatalf("replay epoch %d at parallelism %d: %v %+v", ep, par, err, v)
			}
		}
	}

	// floe state cat: after the drain every row was emitted, and each
	// bidder's state is its 3 newest bids (the frame, prices only).
	v := readState(t, ref.pipelineFrom(t, overGraph), engine.StateQuery{})
	if len(v.Ops) != 1 || v.Ops[0].Kind != "over" {
		t.Fatalf("state: %+v", v.Ops)
	}
	perBidder := map[string]int{}
	for _, r := range v.Ops[0].Rows {
		perBidder[fmt.Sprint(r.Key...)]++
	}
	if len(perBidder) != 5 || v.Ops[0].States != 15 {
		t.Fatalf("state holds %d rows for %d bidders, want 3 for each of 5: %v", v.Ops[0].States, len(perBidder), perBidder)
	}

	e := newGraphEnv(t)
	e.putAuctions(t, files)
	pe := e.pipelineFrom(t, overGraph)
	run(t, pe, engine.Options{UntilEpoch: 2})
	run(t, pe, engine.Options{UntilEpoch: 3, Parallelism: 5})
	run(t, pe, engine.Options{UntilEpoch: 4, Parallelism: 1})
	run(t, pe, engine.Options{Drain: true, Parallelism: 3})
	if got := overSinkLines(t, e.sink); !reflect.DeepEqual(got, want) {
		t.Fatalf("over stage across rescales: %d rows, want %d\n%s", len(got), len(want), diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
	}
	if rep, err := engine.Verify(context.Background(), pe); err != nil || len(rep.Problems) > 0 {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}

	for at := 0; ; at += 3 {
		e := newGraphEnv(t)
		e.putAuctions(t, files)
		p := e.pipelineFrom(t, overGraph)
		run(t, p, engine.Options{UntilEpoch: 2})
		_, err := engine.Run(context.Background(), p, engine.Options{Drain: true, Retry: store.RetryPolicy{MaxAttempts: 1},
			WrapStore: func(n string, s store.Store) store.Store {
				if n != "state" {
					return s
				}
				return store.NewFaulty(s, store.FaultPlan{Faults: []store.Fault{{At: at, Mode: store.CrashAfter}}})
			}})
		if err == nil {
			if at < 20 {
				t.Fatalf("only %d state-store calls: the sweep exercises too little", at)
			}
			break
		}
		if !errors.Is(err, store.ErrCrashed) {
			t.Fatalf("at %d: %v", at, err)
		}
		run(t, p, engine.Options{Drain: true, Parallelism: 1 + at%4})
		if got := overSinkLines(t, e.sink); !reflect.DeepEqual(got, want) {
			t.Fatalf("crash at state call %d: %d rows, want %d\n%s", at, len(got), len(want), diffLines(strings.Join(want, "\n"), strings.Join(got, "\n")))
		}
	}
}
