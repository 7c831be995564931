package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/flinksql"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
)

// replayCmd is `floe replay SPEC --epoch N [--verify] [--out FILE]
// [--parallelism P]`: re-run one committed epoch from its parent's state,
// read-only.
func replayCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		ep          int64
		verify      bool
		out         string
		parallelism int
		emit        string
	)
	cmd := &cobra.Command{
		Use:   "replay SPEC.yaml --epoch N [--verify] [--out FILE] [--parallelism P] [--emit-test DIR]",
		Short: "re-run a committed epoch from the state of the epoch before it, on the input files it read; writes nothing (--verify: compare with what it committed)",
		Long: `Re-run committed epoch N: restore the state of epoch N-1, read exactly the input files
epoch N consumed (named in its manifest), advance the windows to the watermark epoch N
recorded, and print the rows it produces, one line each, sorted:

  output <json>     a row the sink receives (after the stages behind the window)
  late <json>       a row behind the watermark (the columns the window reads)
  rejected <json>   a rejected row: file, line, reason, raw, whole_file

Nothing is written to the pipeline's state, sink or side outputs. --out writes the lines
to a file instead of stdout (compare two with floe replay-diff). --verify compares them
with what epoch N committed: exit 0 identical, 1 with the first difference and the
count (without source.late_url late rows were only counted, so their count is compared).
--parallelism replays with that many subtasks (default: the epoch's); the rows are the same.
Epoch N and N-1 must be retained, and the input files epoch N read must still be there.

--emit-test DIR writes a self-contained regression bundle of epoch N to DIR (a new or empty
folder): the input files it read (inputs/), the state of epoch N-1 as a savepoint folder
(state/), the spec with its URLs pointing inside the bundle (spec.yaml), the replayed lines
(golden.txt), bundle.json, and replay_test.go, whose one call, bundle.Check(t, "."), replays
the bundle with the floe it is built with and compares the lines byte for byte. Put DIR in
a Go module that requires github.com/floe-dev/floe and run go test.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("epoch") {
				return fmt.Errorf("--epoch is required")
			}
			if err := epochFlag(cmd, "epoch", ep); err != nil {
				return err
			}
			if parallelism < 1 && cmd.Flags().Changed("parallelism") {
				return fmt.Errorf("--parallelism %d: must be at least 1", parallelism)
			}
			p, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			opts := engine.ReplayOptions{Epoch: ep, Parallelism: parallelism}
			if out != "" {
				if err := engine.CheckOutputPath(p, "--out", out, false); err != nil {
					return err
				}
			}
			if emit != "" {
				if verify || out != "" {
					return fmt.Errorf("--emit-test excludes --verify and --out")
				}
				if err := engine.CheckOutputPath(p, "--emit-test", emit, true); err != nil {
					return err
				}
				return emitTest(cmd, stdout, args[0], p, opts, emit)
			}
			if !verify {
				res, err := engine.Replay(cmd.Context(), p, opts)
				if err != nil {
					return err
				}
				warn(stderr, res.Warnings)
				if out == "" {
					fmt.Fprintln(stderr, res.Summary())
					return res.WriteText(stdout)
				}
				if err := writeReplay(out, res); err != nil {
					return err
				}
				fmt.Fprintf(stderr, "%s; wrote %d lines to %s\n", res.Summary(), len(res.Lines()), out)
				return nil
			}
			v, err := engine.VerifyReplay(cmd.Context(), p, opts)
			if err != nil {
				return err
			}
			res := v.Replay
			warn(stderr, res.Warnings)
			fmt.Fprintln(stdout, res.Summary())
			if out != "" {
				if err := writeReplay(out, res); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "wrote %d lines to %s\n", len(res.Lines()), out)
			}
			for _, c := range v.Counters {
				fmt.Fprintln(stdout, "counter differs: "+c)
			}
			if v.Identical() {
				fmt.Fprintf(stdout, "identical to what epoch %d committed: %d lines\n", res.Epoch, v.Diff.A)
				return nil
			}
			fmt.Fprintln(stdout, "different from what epoch", res.Epoch, "committed:", v.Diff.Describe("replayed", "committed"))
			return &exitError{code: 1, err: fmt.Errorf("replay of epoch %d differs from what it committed: %d lines, %d counters differ",
				res.Epoch, v.Diff.Differing(), len(v.Counters))}
		},
	}
	f := cmd.Flags()
	f.Int64Var(&ep, "epoch", 0, "the committed epoch to replay (its parent must be retained)")
	f.BoolVar(&verify, "verify", false, "compare the replayed rows with what the epoch committed; exit 1 if they differ")
	f.StringVar(&out, "out", "", "write the replayed lines to this file (for floe replay-diff)")
	f.IntVar(&parallelism, "parallelism", 0, "subtasks to replay with (default: the epoch's generation's)")
	f.StringVar(&emit, "emit-test", "", "write a self-contained regression bundle (inputs, starting state, golden lines, a Go test) to this new or empty folder")
	return cmd
}

// emitTest is `floe replay SPEC --epoch N --emit-test DIR`.
func emitTest(cmd *cobra.Command, stdout io.Writer, specPath string, p *spec.Pipeline, opts engine.ReplayOptions, dir string) error {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("--emit-test %s: the folder is not empty; give a new or empty folder", dir)
	}
	text, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	if flinksql.IsSQL(specPath) { // the bundle carries the YAML the SQL means
		if text, _, err = flinksql.Translate(specPath, text); err != nil {
			return err
		}
	}
	b, err := engine.EmitTestBundle(cmd.Context(), p, engine.EmitOptions{ReplayOptions: opts, Spec: text, Dir: dir})
	if err != nil {
		return err
	}
	from := "empty state"
	switch {
	case b.Parent != nil && b.Restart == manifest.RestoreReset:
		from = "empty state (reset)"
	case b.Parent != nil:
		from = fmt.Sprintf("the state of epoch %d", b.Parent.Epoch)
	}
	fmt.Fprintf(stdout, "wrote the regression bundle of epoch %d of pipeline %s to %s: %d input files, %s, %d golden lines\n",
		b.Epoch, b.Pipeline, dir, len(b.Files), from, b.GoldenLines)
	fmt.Fprintf(stdout, "run it: put %s in a Go module that requires github.com/floe-dev/floe, then go test ./%s\n", dir, filepath.Base(dir))
	return nil
}

func warn(w io.Writer, warnings []string) {
	for _, s := range warnings {
		fmt.Fprintln(w, "warning: "+s)
	}
}

func writeReplay(path string, res *engine.ReplayResult) error {
	var b bytes.Buffer
	if err := res.WriteText(&b); err != nil {
		return err
	}
	if err := writeFileAtomic(path, b.Bytes()); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return nil
}

// replayDiffCmd is `floe replay-diff A B`: compare two `floe replay --out`
// files.
func replayDiffCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "replay-diff A B",
		Short: "compare two `floe replay --out` files: exit 0 identical, 1 with the first difference and the counts",
		Long: `Compare two files written by floe replay --out (say, one epoch replayed by the running
floe and by a candidate build, or with the current and an edited spec). Prints the first
line where they diverge and how many lines only one of them has; exit 0 identical,
1 different, 2 when a file cannot be read or is not a replay file.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var sides [2][]string
			for i, name := range args {
				data, err := os.ReadFile(name)
				if err != nil {
					return err
				}
				if sides[i], err = engine.ReadReplayLines(name, data); err != nil {
					return err
				}
			}
			d := engine.CompareLines(sides[0], sides[1])
			fmt.Fprintln(stdout, d.Describe(args[0], args[1]))
			if !d.Identical() {
				return &exitError{code: 1, err: fmt.Errorf("%s and %s differ: %d lines", args[0], args[1], d.Differing())}
			}
			return nil
		},
	}
}
