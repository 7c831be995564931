package engine_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/bundle"
	"github.com/floe-dev/floe/engine"
)

var regenBundles = flag.Bool("regen-bundle-fixtures", false,
	"rewrite testdata/bundles (only when adding a fixture: a bundle checked into a user's repository must keep replaying)")

// TestBundleFixtures: regression bundles written by an earlier floe (a
// linear pipeline's, bundle_format 1, and a graph pipeline's with a lookup
// table and two sinks, bundle_format 2) replay to their golden.txt byte for
// byte: bundles live in users' repositories, so their format is a promise.
func TestBundleFixtures(t *testing.T) {
	fixtures := []struct {
		name   string
		format int
		emit   func(t *testing.T, dir string)
	}{
		{"linear-v1", 1, func(t *testing.T, dir string) {
			p, text, _ := bundlePipeline(t)
			if _, err := engine.EmitTestBundle(context.Background(), p, engine.EmitOptions{ReplayOptions: engine.ReplayOptions{Epoch: 3}, Spec: text, Dir: dir}); err != nil {
				t.Fatal(err)
			}
		}},
		{"graph-v2", 2, func(t *testing.T, dir string) {
			// The newest epoch that read files and wrote rows to both sinks.
			_, p, text, res := graphBundlePipeline(t)
			for ep := res.LastEpoch; ep > 0; ep-- {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				b, err := engine.EmitTestBundle(context.Background(), p, engine.EmitOptions{ReplayOptions: engine.ReplayOptions{Epoch: ep}, Spec: text, Dir: dir})
				if err != nil {
					t.Fatal(err)
				}
				golden, err := os.ReadFile(filepath.Join(dir, engine.BundleGoldenFile))
				if err != nil {
					t.Fatal(err)
				}
				if len(b.Files) > 0 && strings.Contains(string(golden), "output {") && strings.Contains(string(golden), "output@per-category {") {
					return
				}
			}
			t.Fatal("no epoch wrote rows to both sinks")
		}},
	}
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "bundles", f.name)
			if *regenBundles {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				f.emit(t, dir)
			}
			b, err := engine.ReadBundleManifest(dir)
			if err != nil {
				t.Fatalf("fixture %s: %v", f.name, err)
			}
			if b.BundleFormat != f.format || b.GoldenLines == 0 {
				t.Fatalf("fixture %s: bundle_format %d, %d golden lines; want format %d and some lines", f.name, b.BundleFormat, b.GoldenLines, f.format)
			}
			if err := bundle.Verify(context.Background(), dir); err != nil {
				t.Fatalf("a %s bundle written by an earlier floe no longer replays: %v", f.name, err)
			}
			for _, par := range []int{1, 3} {
				if _, _, err := engine.ReplayBundle(context.Background(), dir, engine.BundleReplayOptions{Parallelism: par}); err != nil {
					t.Fatalf("fixture %s at parallelism %d: %v", f.name, par, err)
				}
			}
		})
	}
}
