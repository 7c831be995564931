// Package bundle runs floe regression bundles, the folders
// `floe replay SPEC --epoch N --emit-test DIR` writes: the input files one
// committed epoch consumed, the state it started from, its recorded
// watermark, the spec, and the rows it produced (golden.txt). The bundle's
// generated replay_test.go is one call:
//
//	func TestReplayEpoch3(t *testing.T) { bundle.Check(t, ".") }
//
// Checked into a repository it is a permanent, byte-exact regression test of
// the floe it is built with.
package bundle

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/engine"
)

// Check replays the bundle in dir (engine.ReplayBundle: from the bundle's
// files alone, writing nothing) and fails t unless the replayed lines are
// golden.txt byte for byte, reporting the first differing line and how many
// lines differ.
func Check(t testing.TB, dir string) {
	t.Helper()
	if err := Verify(context.Background(), dir); err != nil {
		t.Errorf("%v", err)
	}
}

// Verify is Check without a testing.TB: nil when the bundle in dir replays
// to golden.txt byte for byte, otherwise an error saying where it differs.
func Verify(ctx context.Context, dir string) error {
	res, b, err := engine.ReplayBundle(ctx, dir, engine.BundleReplayOptions{})
	if err != nil {
		return fmt.Errorf("floe bundle %s: %w", dir, err)
	}
	golden, err := os.ReadFile(filepath.Join(dir, engine.BundleGoldenFile))
	if err != nil {
		return fmt.Errorf("floe bundle %s: %w", dir, err)
	}
	got := res.Lines()
	var text bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		return err
	}
	if bytes.Equal(text.Bytes(), golden) {
		return nil
	}
	want := strings.Split(strings.TrimSuffix(string(golden), "\n"), "\n")
	if len(golden) == 0 {
		want = nil
	}
	d := engine.CompareLines(got, want)
	// The counts compare the lines as multisets (golden.txt may have been
	// edited out of order); the first difference is positional.
	sorted := slices.Clone(want)
	slices.Sort(sorted)
	c := engine.CompareLines(got, sorted)
	d.OnlyA, d.OnlyB = c.OnlyA, c.OnlyB
	what := fmt.Sprintf("epoch %d of pipeline %q (bundle %s, emitted by floe %s)", b.Epoch, b.Pipeline, dir, orUnknown(b.FloeVersion))
	if d.Identical() {
		return fmt.Errorf("%s: the replayed lines equal golden.txt's, but the bytes differ (line endings, a missing final newline?): keep golden.txt byte for byte", what)
	}
	return fmt.Errorf("%s replays differently from golden.txt:\n%s", what, d.Describe("replayed", "golden.txt"))
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown version)"
	}
	return s
}
