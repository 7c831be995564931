package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
)

// TestWorkersRefuseRowLimit: --workers refuses a source with
// max_rows_per_epoch before anything is written. An epoch's files are
// decided (and recorded processed) before any worker decodes its share, so
// a row limit cutting a share would lose the rows of the files it cut.
func TestWorkersRefuseRowLimit(t *testing.T) {
	for _, tc := range []struct{ name, tmpl, field string }{
		{"linear", strings.Replace(windowSpec, "max_files_per_epoch: 1,", "max_files_per_epoch: 2, max_rows_per_epoch: 1,", 1), "source.max_rows_per_epoch"},
		{"graph", strings.Replace(auctionGraph, "    max_files_per_epoch: 1\n    watermark: {max_out_of_orderness: 2s}\nstages:", "    max_files_per_epoch: 1\n    max_rows_per_epoch: 10\n    watermark: {max_out_of_orderness: 2s}\nstages:", 1), "sources.bids.max_rows_per_epoch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tmpl == windowSpec || tc.tmpl == auctionGraph {
				t.Fatal("the spec template changed")
			}
			var stateDir string
			var run func() error
			if tc.name == "linear" {
				e := fileEnv(t)
				e.put(t, "a.jsonl", jsonl(ev("00:00:10", "u1", 1)))
				p := e.pipeline(t, tc.tmpl)
				stateDir = strings.TrimPrefix(p.State.URL, "file://")
				run = func() error {
					_, err := engine.Run(context.Background(), p, engine.Options{Workers: 2, Worker: 0})
					return err
				}
			} else {
				g := newGraphEnv(t)
				g.putAuctions(t, 2)
				p := g.pipelineFrom(t, tc.tmpl)
				stateDir = strings.TrimPrefix(g.state, "file://")
				run = func() error {
					_, err := engine.Run(context.Background(), p, engine.Options{Workers: 2, Worker: 1})
					return err
				}
			}
			err := run()
			if err == nil || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), "--workers 2") {
				t.Fatalf("run with --workers 2: %v; want a refusal naming %s", err, tc.field)
			}
			if keys := listKeys(t, "file://"+stateDir); len(keys) != 0 {
				t.Fatalf("the refused run wrote %v", keys)
			}
		})
	}
}
