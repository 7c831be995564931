package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/engine"
)

// stateCmd is `floe state cat|diff|export`: the decoded state of a
// retained epoch (the window's; in the graph form every keyed stage's),
// read-only.
func stateCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "look inside the state of a retained epoch: cat, diff, export (read-only)",
	}
	cmd.AddCommand(stateCatCmd(stdout), stateDiffCmd(stdout), stateExportCmd(stdout))
	return cmd
}

// epochFlag checks an explicitly given --epoch-like flag.
func epochFlag(cmd *cobra.Command, name string, v int64) error {
	if cmd.Flags().Changed(name) && v < 1 {
		return fmt.Errorf("--%s %d: must be a committed epoch number (1 or more)", name, v)
	}
	return nil
}

func stateCatCmd(stdout io.Writer) *cobra.Command {
	var (
		ep     int64
		op     string
		keys   []string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "cat SPEC.yaml",
		Short: "print the state of an epoch (default: the head), one line per key and window with its finalised aggregates",
		Long: `Print the state of a retained epoch (default: the head) as a run would restore it,
one line per key and open window:

  op=<id> <key>=<v>... window_start=<RFC 3339> window_end=<RFC 3339> <aggregate>=<v>... key_group=<g> subtask=<s>

Each aggregate is the value the window would emit if the input ended at this epoch.
--key matches the key's values joined by "," (e.g. --key u42, or --key u42,/home for two key columns).

A pipeline in the graph form prints every keyed stage (--op STAGE for one): a window stage
as above, a dedup, top_n, over or join stage one line per row it holds:

  op=<stage> <key>=<v>... <state column>=<v>... key_group=<g> subtask=<s>`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := epochFlag(cmd, "epoch", ep); err != nil {
				return err
			}
			p, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			v, err := engine.ReadState(cmd.Context(), p, engine.StateQuery{Epoch: ep, Op: op, Keys: keys})
			if err != nil {
				return err
			}
			if asJSON {
				return v.WriteJSON(stdout)
			}
			return v.WriteText(stdout)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&ep, "epoch", 0, "a retained epoch (default: the head)")
	f.StringVar(&op, "op", "", "only this stateful operator (in the graph form: a keyed stage's name)")
	f.StringArrayVar(&keys, "key", nil, "only this key (repeatable); values of several key columns joined by \",\"")
	f.BoolVar(&asJSON, "json", false, "one JSON document, one row per line")
	return cmd
}

func stateDiffCmd(stdout io.Writer) *cobra.Command {
	var (
		from, to int64
		sample   int
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "diff SPEC.yaml --from N --to M",
		Short: "compare the state of two retained epochs: windows (and held stage rows) added, removed and changed; exit 0 identical, 1 different",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, f := range []string{"from", "to"} {
				if !cmd.Flags().Changed(f) {
					return fmt.Errorf("--%s is required", f)
				}
			}
			if err := epochFlag(cmd, "from", from); err != nil {
				return err
			}
			if err := epochFlag(cmd, "to", to); err != nil {
				return err
			}
			if sample < 1 {
				return fmt.Errorf("--sample %d: must be at least 1", sample)
			}
			p, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			d, err := engine.DiffState(cmd.Context(), p, from, to, sample)
			if err != nil {
				return err
			}
			if asJSON {
				err = d.WriteJSON(stdout)
			} else {
				err = d.WriteText(stdout)
			}
			if err != nil {
				return err
			}
			if !d.Identical {
				return &exitError{code: 1, err: fmt.Errorf("the state of epochs %d and %d differs", from, to)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&from, "from", 0, "the older epoch")
	f.Int64Var(&to, "to", 0, "the newer epoch")
	f.IntVar(&sample, "sample", engine.DefaultDiffSample, "rows shown of each kind (added, removed, changed)")
	f.BoolVar(&asJSON, "json", false, "machine-readable output")
	return cmd
}

func stateExportCmd(stdout io.Writer) *cobra.Command {
	var (
		ep  int64
		op  string
		out string
	)
	cmd := &cobra.Command{
		Use:   "export SPEC.yaml --epoch N --out FILE.parquet",
		Short: "write the decoded state of an epoch as one Parquet table (--out - for stdout)",
		Long: `Write the decoded state of a retained epoch (default: the head) as one Parquet table with
columns operator, the key columns, window_start, window_end (timestamp, UTC), one column per
aggregate (finalised), key_group, subtask. Query it with DuckDB, e.g.:

  duckdb -c "select user_id, clicks from 'state.parquet' order by clicks desc limit 10"

A pipeline in the graph form exports one keyed stage (--op STAGE, required when it has several):
a window stage as above; a dedup, top_n, over or join stage as operator, the key columns, its state
columns, key_group, subtask.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := epochFlag(cmd, "epoch", ep); err != nil {
				return err
			}
			if out == "" {
				return fmt.Errorf("--out is required (a file, or - for stdout)")
			}
			p, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			if out != "-" {
				if err := engine.CheckOutputPath(p, "--out", out, false); err != nil {
					return err
				}
			}
			v, err := engine.ReadState(cmd.Context(), p, engine.StateQuery{Epoch: ep, Op: op})
			if err != nil {
				return err
			}
			data, err := v.Parquet()
			if err != nil {
				return err
			}
			if out == "-" {
				_, err = stdout.Write(data)
				return err
			}
			if err := writeFileAtomic(out, data); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			rows := 0
			for _, o := range v.Ops {
				rows += len(o.Rows)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %d rows, state of epoch %d (generation %d)\n", out, rows, v.Epoch, v.Generation)
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&ep, "epoch", 0, "a retained epoch (default: the head)")
	f.StringVar(&op, "op", "", "the stateful operator to export (in the graph form: a keyed stage's name)")
	f.StringVar(&out, "out", "", "the Parquet file to write, or - for stdout")
	return cmd
}

// writeFileAtomic writes data to a temporary file beside path, then renames
// it over path, so a reader never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
