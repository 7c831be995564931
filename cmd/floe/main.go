// Command floe runs object-storage-native stream pipelines.
//
//	floe run pipeline.yaml [--once | --trigger 10s] [--parallelism N] [--drain] [--until-epoch N]
//	         [--metrics-file F] [--metrics-addr :9464] [--metrics-push URL] [--max-restarts N]
//	floe outputs pipeline.yaml
//	floe plan pipeline.yaml [--parallelism N]
//	floe status pipeline.yaml [--json]
//	floe history pipeline.yaml [--limit N] [--json]
//
// Exit codes: 0 success, 1 a finding (verify, status of a damaged pipeline,
// an incompatible plan), 2 could not run, 3 fenced or superseded by another
// writer of the same pipeline (someone else is running it).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/flinksql"
	"github.com/floe-dev/floe/spec"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// exitError carries an exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "floe: "+oneLine(err.Error()))
	var ae *afterError
	if errors.As(err, &ae) {
		fmt.Fprintln(stderr, ae.after)
	}
	return exitCode(err)
}

// oneLine keeps a multi-problem error readable on one line per problem but
// never splits a single problem.
func oneLine(s string) string { return strings.TrimSpace(s) }

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "floe",
		Short:         "floe: an object-storage-native micro-batch stream engine",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(runCmd(stdout, stderr), outputsCmd(stdout), planCmd(stdout), statusCmd(stdout), historyCmd(stdout), verifyCmd(stdout),
		savepointCmd(stdout), rollbackCmd(stdout), reprocessCmd(stdout))
	root.AddCommand(stateCmd(stdout))
	root.AddCommand(replayCmd(stdout, stderr), replayDiffCmd(stdout))
	root.AddCommand(validateCmd(stdout, stderr), versionCmd(stdout))
	root.Version = versionLine(engine.BuildVersion())
	root.SetVersionTemplate("{{.Version}}\n")
	return root
}

// versionLine is the one line `floe --version` prints.
func versionLine(v engine.Version) string {
	s := "floe " + v.Version
	if v.Revision != "" {
		rev := v.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " (" + rev
		if v.Modified {
			s += ", modified"
		}
		if v.Time != "" {
			s += ", " + v.Time
		}
		s += ")"
	}
	return s + ", " + v.Go
}

func versionCmd(stdout io.Writer) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "print the build (module version, VCS revision and time) and the on-storage formats it writes and reads",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := engine.BuildVersion()
			if asJSON {
				return writeJSON(stdout, v)
			}
			fmt.Fprintln(stdout, versionLine(v))
			fmt.Fprintf(stdout, "module %s\n", v.Module)
			fmt.Fprintln(stdout, "on-storage formats:")
			for _, f := range v.Formats {
				fmt.Fprintf(stdout, "  %s: writes %s, reads %s\n", f.Name, f.Writes, f.Reads)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "machine-readable output")
	return cmd
}

func validateCmd(stdout, stderr io.Writer) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "validate SPEC.yaml",
		Short: "check a spec and compile it against the sources' schemas, writing nothing (exit 0 valid, 2 invalid)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := loadSpec(args[0])
			var rep *engine.ValidateReport
			if err != nil {
				// The file does not parse: its problems are the report.
				rep = &engine.ValidateReport{}
				for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
					rep.Problems = append(rep.Problems, strings.TrimSpace(line))
				}
			} else if rep, err = engine.Validate(cmd.Context(), p, engine.Options{}); err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(stdout, rep); err != nil {
					return err
				}
			} else if rep.Valid {
				fmt.Fprintf(stdout, "%s: valid\n", args[0])
				for _, u := range rep.Unchecked {
					fmt.Fprintf(stdout, "not checked: %s\n", u)
				}
			} else {
				for _, pr := range rep.Problems {
					fmt.Fprintln(stderr, pr)
				}
			}
			if !rep.Valid {
				return &exitError{code: 2, err: fmt.Errorf("%s is not valid: %d problem(s)", args[0], len(rep.Problems))}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "machine-readable output")
	return cmd
}

// checkOutputFiles refuses, before anything is written, a file a flag
// (name -> path; "" not given) would write inside one of the pipeline's
// locations (engine.CheckOutputPath).
func checkOutputFiles(p *spec.Pipeline, flags map[string]string) error {
	names := make([]string, 0, len(flags))
	for name := range flags {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if path := flags[name]; path != "" {
			if err := engine.CheckOutputPath(p, name, path, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadSpec reads the pipeline every command names first: a YAML spec, or a
// Flink SQL file (FILE.sql, package flinksql) lowered onto the same spec.
func loadSpec(path string) (*spec.Pipeline, error) {
	if flinksql.IsSQL(path) {
		return flinksql.Load(path)
	}
	p, err := spec.Load(path)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// writeJSON prints v as indented JSON: the --json form of every command.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newLogger(format string, w io.Writer, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func runCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		once        bool
		trigger     time.Duration
		parallelism int
		drain       bool
		untilEpoch  int64
		logFormat   string
		quiet       bool
		verbose     bool
		cpuProfile  string
		metricsFile string
		metricsAddr string
		metricsPush string
		maxRestarts int
		fullList    bool
		workers     int
		worker      int
		workerWait  time.Duration
		takeOver    time.Duration
		runID       string
		backoff     time.Duration
		rf          *restoreFlags
		sf          *storeFlags
	)
	cmd := &cobra.Command{
		Use:   "run SPEC.yaml",
		Short: "process what is new, epoch by epoch, then exit (--once, the default) or keep going (--trigger)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if once && cmd.Flags().Changed("trigger") {
				return fmt.Errorf("--once and --trigger exclude each other")
			}
			if trigger < 0 || (trigger == 0 && cmd.Flags().Changed("trigger")) {
				return fmt.Errorf("--trigger %s: must be positive (leave it out, or use --once, to run until caught up)", trigger)
			}
			if parallelism < 1 && cmd.Flags().Changed("parallelism") {
				return fmt.Errorf("--parallelism %d: must be at least 1", parallelism)
			}
			if cmd.Flags().Changed("workers") && workers < 1 {
				return fmt.Errorf("--workers %d: must be at least 1", workers)
			}
			if !cmd.Flags().Changed("worker") && workers > 1 {
				idx, ok := os.LookupEnv("JOB_COMPLETION_INDEX")
				if !ok {
					return fmt.Errorf("--workers %d needs --worker (0..%d), or $JOB_COMPLETION_INDEX as a Kubernetes Indexed Job sets it", workers, workers-1)
				}
				n, err := strconv.Atoi(idx)
				if err != nil {
					return fmt.Errorf("$JOB_COMPLETION_INDEX %q: not a worker index: %w", idx, err)
				}
				worker = n
			}
			// --workers 1 --worker 0 is one process (a Job template scaled
			// down to one worker): accepted, as is its --run-id.
			if cmd.Flags().Changed("worker") && !cmd.Flags().Changed("workers") {
				return fmt.Errorf("--worker %d needs --workers (the worker count)", worker)
			}
			if (workers > 1 || cmd.Flags().Changed("worker")) && (worker < 0 || worker >= workers) {
				return fmt.Errorf("--worker %d: must be in 0..%d with --workers %d", worker, workers-1, workers)
			}
			if cmd.Flags().Changed("run-id") && !cmd.Flags().Changed("workers") {
				return fmt.Errorf("--run-id names a run of several workers: it needs --workers")
			}
			if len(runID) > 253 || strings.ContainsFunc(runID, unicode.IsControl) {
				return fmt.Errorf("--run-id %.40q: at most 253 printable characters (a Job's name)", runID)
			}
			if workerWait <= 0 {
				return fmt.Errorf("--worker-timeout %s: must be positive", workerWait)
			}
			if untilEpoch < 1 && cmd.Flags().Changed("until-epoch") {
				return fmt.Errorf("--until-epoch %d: must be at least 1", untilEpoch)
			}
			if trigger == 0 {
				for _, name := range []string{"max-restarts", "restart-backoff"} {
					if cmd.Flags().Changed(name) {
						return fmt.Errorf("--%s applies to --trigger workers (under --once, the scheduler's next run is the retry)", name)
					}
				}
			}
			if maxRestarts < 0 {
				return fmt.Errorf("--max-restarts %d: must be at least 0 (0: the first failure is final)", maxRestarts)
			}
			if backoff <= 0 {
				return fmt.Errorf("--restart-backoff %s: must be positive", backoff)
			}
			if metricsPush != "" && trigger > 0 {
				return fmt.Errorf("--metrics-push is for --once runs (it pushes when the run ends); a --trigger worker is scraped: use --metrics-addr")
			}
			if metricsPush != "" {
				if _, err := parsePushURL(metricsPush); err != nil {
					return err // before the run, not after it
				}
			}
			p, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			if err := checkOutputFiles(p, map[string]string{"--metrics-file": metricsFile, "--cpuprofile": cpuProfile}); err != nil {
				return err
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			tty := isTerminal(stderr) && logFormat == "" && !quiet
			level := slog.LevelInfo
			if tty {
				level = slog.LevelWarn // the progress line tells the story
			}
			if verbose {
				level = slog.LevelDebug
			}
			ui := &runUI{}
			logOut := stderr
			if tty {
				ui.progress = newProgressLine(stderr, terminalWidth(stderr.(*os.File)), trigger)
				logOut = ui.progress // log lines go above the progress line
			}
			log, err := newLogger(logFormat, logOut, level)
			if err != nil {
				return err
			}
			// First SIGINT/SIGTERM: finish the epoch in progress, then exit 0.
			// Second: abort at once (the epoch never happened).
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stopCh := make(chan struct{})
			sigs := make(chan os.Signal, 2)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			go func() {
				if _, ok := <-sigs; !ok {
					return
				}
				log.Warn("stopping after the epoch in progress commits; signal again to abort it")
				close(stopCh)
				if _, ok := <-sigs; ok {
					cancel()
				}
			}()
			opts := engine.Options{Trigger: trigger, Parallelism: parallelism, Drain: drain, UntilEpoch: untilEpoch, Log: log, Stop: stopCh, FullList: fullList,
				Workers: workers, Worker: worker, WorkerTimeout: workerWait, WorkerTakeOver: takeOver, WorkerRun: runID}
			if err := rf.apply(&opts); err != nil {
				return err
			}
			if err := sf.apply(&opts); err != nil {
				return err
			}
			if metricsFile != "" || metricsAddr != "" || metricsPush != "" {
				ui.metrics = newRunMetrics(metricsFile, p, log)
			}
			if metricsAddr != "" {
				addr, err := ui.metrics.serve(metricsAddr)
				if err != nil {
					return err
				}
				log.Info("metrics: serving Prometheus metrics", "url", "http://"+addr.String()+"/metrics")
			}
			opts.Progress = ui.onProgress()
			opts.WrapStore = testWrapStore
			ui.start(ctx)
			var res *engine.Result
			if trigger > 0 {
				sup := &supervisor{
					policy:    restartPolicy{max: maxRestarts, base: backoff, maxDelay: defaultRestartMaxDelay},
					log:       log,
					stop:      stopCh,
					restoring: opts.ResetState,
					run:       attemptRunner(p, opts),
					onFailure: func(n int) {
						if ui.metrics != nil {
							ui.metrics.failed(n)
						}
					},
					onRestart: func(int) {
						if ui.metrics != nil {
							ui.metrics.restarted()
						}
					},
				}
				res, err = sup.supervise(ctx)
			} else {
				res, err = engine.Run(ctx, p, opts)
			}
			if err != nil && ctx.Err() != nil {
				err = fmt.Errorf("aborted on a second signal: the epoch in progress was not committed (the next run redoes it)")
			}
			ui.finish(res, err)
			if metricsPush != "" {
				if perr := ui.metrics.push(context.Background(), metricsPush); perr != nil {
					log.Warn("metrics: the push to the Pushgateway failed; the run's exit code is not affected", "error", perr)
				}
			}
			return runReport(stdout, stderr, p, args[0], untilEpoch, res, err)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&once, "once", false, "process what is new, then exit (the default)")
	f.DurationVar(&trigger, "trigger", 0, "keep running, starting an epoch every interval (e.g. 10s)")
	f.IntVar(&parallelism, "parallelism", 0, "keyed subtasks for this run (default: the spec's state.parallelism); a change starts a new generation")
	f.BoolVar(&drain, "drain", false, "end the input: advance the watermark to +inf and emit every open window")
	f.BoolVar(&fullList, "full-list", false, "with source.order: lexical, list the whole source this run (finds late keys that sort before the listing frontier now rather than at the next full listing)")
	f.Int64Var(&untilEpoch, "until-epoch", 0, "stop after committing this epoch")
	f.IntVar(&workers, "workers", 1, "run the pipeline in this many processes together, coordinated through the state store (each started with its own --worker); a change starts a new generation")
	f.IntVar(&worker, "worker", 0, "with --workers: this process's index, 0..workers-1 (default $JOB_COMPLETION_INDEX, as a Kubernetes Indexed Job sets it)")
	f.DurationVar(&takeOver, "worker-takeover", 0, "with --workers: how long worker 1 waits for worker 0 to decide or commit an epoch before doing it itself (worker w waits w times as long; default 10s)")
	_ = f.MarkHidden("worker-takeover")
	f.StringVar(&runID, "run-id", os.Getenv("FLOE_RUN_ID"), "with --workers: a name of this run of the workers, the same in each (e.g. the Job's name; default $FLOE_RUN_ID): a worker restarted after the others ended the run then ends too, instead of waiting for them")
	f.DurationVar(&workerWait, "worker-timeout", 5*time.Minute, "with --workers: give up (exit 2, naming the missing workers) when the other workers show no progress for this long")
	f.StringVar(&logFormat, "log-format", "", "structured logs: text or json (default: a progress line on a terminal, text otherwise)")
	f.BoolVar(&quiet, "no-progress", false, "no progress line, logs instead")
	f.BoolVar(&verbose, "verbose", false, "debug logs (phase timings, generations)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	_ = f.MarkHidden("cpuprofile")
	f.StringVar(&metricsFile, "metrics-file", "", "write Prometheus text-format metrics to this file (atomically: at the start, after every epoch and every failed --trigger attempt, at the end), e.g. for node_exporter's textfile collector")
	f.StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics over HTTP at this address's /metrics while the run lasts (e.g. :9464 or 127.0.0.1:9464), refreshed after every epoch")
	f.StringVar(&metricsPush, "metrics-push", "", "with --once: push the run's metrics to this Pushgateway URL when the run ends (job floe, instance = the pipeline name)")
	f.IntVar(&maxRestarts, "max-restarts", defaultMaxRestarts, "with --trigger: restart after a transient storage failure up to this many consecutive times (a committed epoch resets the count; 0: the first failure is final)")
	f.DurationVar(&backoff, "restart-backoff", defaultRestartBackoff, "with --trigger: delay before the first restart; it doubles with each consecutive failure up to 5m, with jitter")
	rf = addRestoreFlags(cmd)
	sf = addStoreFlags(cmd)
	return cmd
}

func outputsCmd(stdout io.Writer) *cobra.Command {
	var sink string
	cmd := &cobra.Command{
		Use:   "outputs SPEC.yaml",
		Short: "print the committed output files, one URL per line (exactly-once readers use only these)",
		Long: "Print the URL of every committed output file, one per line, in commit order. A pipeline with several\n" +
			"sinks (graph form) prints every sink's files; --sink NAME prints one sink's.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			urls, err := engine.OutputURLs(cmd.Context(), p, sink)
			if err != nil {
				return err
			}
			for _, u := range urls {
				fmt.Fprintln(stdout, u)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&sink, "sink", "", "print only this sink's files (a name under sinks:; \"sink\" in the linear form)")
	return cmd
}

func planCmd(stdout io.Writer) *cobra.Command {
	var parallelism, workers int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "plan SPEC.yaml",
		Short: "print what the next run would do, writing nothing",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			if workers < 1 {
				return fmt.Errorf("--workers %d: must be at least 1", workers)
			}
			rep, err := engine.Plan(cmd.Context(), p, engine.Options{Parallelism: parallelism, Workers: workers})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, rep)
			}
			rep.Print(stdout)
			if !rep.Compatible {
				return &exitError{code: 1, err: fmt.Errorf("state is not compatible: %s", rep.Incompatible)}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&parallelism, "parallelism", 0, "parallelism the next run would use")
	cmd.Flags().IntVar(&workers, "workers", 1, "worker processes the next run would use: what each owns, and what an epoch costs in requests")
	cmd.Flags().BoolVar(&asJSON, "json", false, "machine-readable output")
	return cmd
}

func verifyCmd(stdout io.Writer) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify SPEC.yaml",
		Short: "check every file the retained epochs reference (size and checksum), writing nothing; exit 1 on damage",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			rep, err := engine.Verify(cmd.Context(), p)
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(stdout, rep); err != nil {
					return err
				}
			} else {
				for _, pr := range rep.Problems {
					fmt.Fprintln(stdout, "DAMAGED: "+pr)
				}
				fmt.Fprintf(stdout, "checked %d manifests and %d files up to epoch %d: %d problems\n", rep.Manifests, rep.Files, rep.Head, len(rep.Problems))
			}
			if len(rep.Problems) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("verify found %d damaged or missing files", len(rep.Problems))}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "machine-readable output")
	return cmd
}
