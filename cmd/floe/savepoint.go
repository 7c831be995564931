package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/engine"
)

// restoreFlags are the flags of `floe run` that restore something other
// than the head.
type restoreFlags struct {
	fromSavepoint string
	claim         bool
	resetState    bool
	yes           bool
}

func addRestoreFlags(cmd *cobra.Command) *restoreFlags {
	rf := &restoreFlags{}
	f := cmd.Flags()
	f.StringVar(&rf.fromSavepoint, "from-savepoint", "", "start a new generation from a savepoint: a name (floe savepoint list), the URL of a savepoint folder anywhere, or its path (relative to the working directory)")
	f.BoolVar(&rf.claim, "claim", false, "with --from-savepoint NAME: reference the savepoint's files instead of copying them (it can be deleted once retention releases them)")
	f.BoolVar(&rf.resetState, "reset-state", false, "start a new generation with empty operator state (open windows are dropped); files already read are not read again; needs --yes")
	f.BoolVar(&rf.yes, "yes", false, "confirm --reset-state")
	return rf
}

func (rf *restoreFlags) apply(opts *engine.Options) error {
	if rf.resetState && !rf.yes {
		return fmt.Errorf("--reset-state drops every open window of the pipeline; add --yes to confirm")
	}
	opts.FromSavepoint, opts.Claim, opts.ResetState = rf.fromSavepoint, rf.claim, rf.resetState
	return nil
}

func savepointCmd(stdout io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "savepoint",
		Short: "create, list and delete savepoints: portable copies of a committed epoch",
	}
	var epochN int64
	var asJSON bool
	create := &cobra.Command{
		Use:   "create SPEC.yaml NAME",
		Short: "copy a committed epoch (default: the head) into <state>/<pipeline>/savepoints/NAME/",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			sp, err := engine.CreateSavepoint(cmd.Context(), p, args[1], epochN)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(stdout).Encode(sp)
			}
			fmt.Fprintf(stdout, "savepoint %s: epoch %d (generation %d), %d files, %d bytes\n  %s\nrestore with: floe run %s --from-savepoint %s\n",
				sp.Name, sp.Epoch, sp.Generation, sp.Files, sp.Bytes, sp.URL, args[0], sp.Name)
			return nil
		},
	}
	create.Flags().Int64Var(&epochN, "epoch", 0, "a retained epoch instead of the head")
	create.Flags().BoolVar(&asJSON, "json", false, "machine-readable output")
	var listJSON bool
	list := &cobra.Command{
		Use:   "list SPEC.yaml",
		Short: "list the pipeline's savepoints",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			sps, err := engine.ListSavepoints(cmd.Context(), p)
			if err != nil {
				return err
			}
			if listJSON {
				return writeJSON(stdout, sps)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "name\tepoch\tgeneration\twatermark\tbytes\tcreated\tclaimed")
			for _, s := range sps {
				if !s.Complete {
					fmt.Fprintf(tw, "%s\t-\t-\t-\t-\tincomplete (create it again to finish, or delete it)\t-\n", s.Name)
					continue
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%s\t%v\n", s.Name, s.Epoch, s.Generation, s.Watermark, s.Bytes, s.CreatedAt, s.Claimed)
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&listJSON, "json", false, "machine-readable output")
	del := &cobra.Command{
		Use:   "delete SPEC.yaml NAME",
		Short: "delete a savepoint (refused while retained epochs reference it)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			if err := engine.DeleteSavepoint(cmd.Context(), p, args[1]); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "deleted savepoint %s\n", args[1])
			return nil
		},
	}
	imp := &cobra.Command{
		Use:   "import SPEC.yaml NAME DIR",
		Short: "store a savepoint folder whose state files were edited offline: validated (schema, key groups), checksums recomputed",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			dir := args[2]
			if !strings.Contains(dir, "://") {
				abs, err := filepath.Abs(dir)
				if err != nil {
					return err
				}
				dir = (&url.URL{Scheme: "file", Path: abs}).String()
			}
			sp, err := engine.ImportSavepoint(cmd.Context(), p, args[1], dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "imported savepoint %s: epoch %d, %d files, %d bytes\nrestore with: floe run %s --from-savepoint %s\n",
				sp.Name, sp.Epoch, sp.Files, sp.Bytes, args[0], sp.Name)
			return nil
		},
	}
	root.AddCommand(create, list, del, imp)
	return root
}

func rollbackCmd(stdout io.Writer) *cobra.Command {
	var to int64
	cmd := &cobra.Command{
		Use:   "rollback SPEC.yaml --to-epoch N",
		Short: "start a new generation from a retained epoch; the epochs after it are abandoned (their outputs are no longer listed)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to < 1 {
				return fmt.Errorf("--to-epoch N is required (a retained epoch; floe status shows the head)")
			}
			p, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			st, err := engine.ReadStatus(cmd.Context(), p)
			if err != nil {
				return err
			}
			// Commit the restored state as one epoch and stop: the next
			// run continues as usual (with a corrected spec, say).
			res, err := engine.Run(cmd.Context(), p, engine.Options{RollbackTo: to, UntilEpoch: st.Epoch + 1})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "rolled back to epoch %d: generation %d committed epoch %d from it; run the pipeline as usual to continue\n",
				to, res.Generation, res.LastEpoch)
			return nil
		},
	}
	cmd.Flags().Int64Var(&to, "to-epoch", 0, "the retained epoch to restore")
	return cmd
}

func reprocessCmd(stdout io.Writer) *cobra.Command {
	var rejected bool
	var files string
	cmd := &cobra.Command{
		Use:   "reprocess SPEC.yaml (--rejected | --files GLOB)",
		Short: "read again input files already processed (every file rejected whole in the retained epochs, or those matching GLOB), in a new generation with the same state",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !rejected && files == "" {
				return fmt.Errorf("say what to read again: --rejected (files no row of which was accepted) or --files GLOB")
			}
			p, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			res, err := engine.Run(cmd.Context(), p, engine.Options{ReprocessRejected: rejected, ReprocessFiles: files})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "generation %d: committed epochs %d..%d, %d files read (again), %d rows in (%d rejected), %d rows out\n",
				res.Generation, res.FirstEpoch, res.LastEpoch, res.Files, res.Rows+res.RowsRejected, res.RowsRejected, res.RowsOut)
			return nil
		},
	}
	cmd.Flags().BoolVar(&rejected, "rejected", false, "every input file none of whose rows was accepted (rejected whole) in the retained epochs")
	cmd.Flags().StringVar(&files, "files", "", "input files whose key or base name matches this glob (path.Match syntax)")
	return cmd
}

// storeFlags bound object-store requests (see store.RetryPolicy).
type storeFlags struct {
	requestTimeout time.Duration
	retryBudget    time.Duration
}

func addStoreFlags(cmd *cobra.Command) *storeFlags {
	sf := &storeFlags{}
	f := cmd.Flags()
	f.DurationVar(&sf.requestTimeout, "request-timeout", 0, "longest wait for an object-store response (and between body bytes); 0: 30s")
	f.DurationVar(&sf.retryBudget, "retry-budget", 0, "how long failing object-store requests are retried, with backoff, before the run gives up; 0: 45s")
	return sf
}

func (sf *storeFlags) apply(opts *engine.Options) error {
	if sf.requestTimeout < 0 || sf.retryBudget < 0 {
		return fmt.Errorf("--request-timeout and --retry-budget must not be negative")
	}
	opts.Retry.RequestTimeout, opts.Retry.IdleTimeout, opts.Retry.MaxElapsed = sf.requestTimeout, sf.requestTimeout, sf.retryBudget
	return nil
}
