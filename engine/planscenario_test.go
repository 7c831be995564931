package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/internal/datagen"
	"github.com/floe-dev/floe/internal/scenario"
	"github.com/floe-dev/floe/spec"
)

// TestPlanScenarios runs the planner's decisions as scenario files
// (testdata/plan/*.txt, internal/scenario; -rewrite rewrites the expected
// outputs): what `floe plan` says the next run does after the runs before
// it (a generation kept or started and why, a plan change migrated or
// refused, what each subtask restores), checked against real runs on
// file:// directories. Commands:
//
//	spec NAME        the input lines are a pipeline spec; {{source}}, {{state}},
//	                 {{sink}}, {{late}} are the scenario's directories
//	gen files=N rows=R [seed=S] [start=DUR]   writes a deterministic clickstream
//	                 (datagen) starting DUR after 2024-01-01T00:00:00Z
//	plan NAME [parallelism=N]   prints what `floe plan` says, from "next run:" on
//	run NAME [parallelism=N]    runs the pipeline until caught up; prints the epochs
//	                 and generation committed, or the error
//
// Paths print as ROOT/..., attempt ids as ATTEMPT.
func TestPlanScenarios(t *testing.T) {
	for _, f := range scenario.Files(t, "testdata/plan/*.txt") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ps := &planScenario{e: fileEnv(t), specs: map[string]*spec.Pipeline{}}
			scenario.Run(t, f, ps.exec)
		})
	}
}

type planScenario struct {
	e     *env
	specs map[string]*spec.Pipeline
	gens  int
}

func (s *planScenario) exec(t *testing.T, b *scenario.Block) []string {
	cmd, a := b.Fields()
	fields := strings.Fields(b.Cmd)
	name := ""
	if len(fields) > 1 && !strings.Contains(fields[1], "=") {
		name = fields[1]
	}
	par := 0
	if v := a["parallelism"]; v != "" {
		par, _ = strconv.Atoi(v)
	}
	p := s.specs[name]
	switch cmd {
	case "spec":
		s.specs[name] = s.e.pipeline(t, strings.Join(b.Input, "\n"))
		return []string{"ok"}
	case "gen":
		n, _ := strconv.Atoi(a["files"])
		rows, _ := strconv.ParseInt(a["rows"], 10, 64)
		seed, _ := strconv.ParseUint(a["seed"], 10, 64)
		var start time.Duration
		if v := a["start"]; v != "" {
			start, _ = time.ParseDuration(v)
		}
		s.gens++
		prefix := fmt.Sprintf("g%02d-", s.gens)
		var keys []string
		err := datagen.Generate(datagen.Options{Rows: rows, Files: n, Users: 20, Span: 5 * time.Minute, Seed: seed,
			Start: datagen.DefaultStart.Add(start)}, func(k string, data []byte) error {
			s.e.put(t, prefix+k, data)
			keys = append(keys, prefix+k)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return keys
	case "plan", "run":
		if p == nil {
			t.Fatalf("%s: no spec %q", b.Cmd, name)
		}
		opts := engine.Options{Parallelism: par}
		if cmd == "run" {
			res, err := engine.Run(context.Background(), p, opts)
			if err != nil {
				return s.norm([]string{"error: " + err.Error()})
			}
			return []string{fmt.Sprintf("committed %d epochs (%d..%d), generation %d, rows out %d", res.Epochs, res.FirstEpoch, res.LastEpoch, res.Generation, res.RowsOut)}
		}
		rep, err := engine.Plan(context.Background(), p, opts)
		if err != nil {
			return s.norm([]string{"error: " + err.Error()})
		}
		var buf bytes.Buffer
		rep.Print(&buf)
		text := buf.String()
		if i := strings.Index(text, "next run:"); i >= 0 {
			text = text[i:]
		}
		var out []string
		for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			if strings.TrimSpace(l) != "" {
				out = append(out, strings.TrimRight(l, " "))
			}
		}
		return s.norm(out)
	}
	t.Fatalf("unknown command %q", b.Cmd)
	return nil
}

// norm replaces the scenario's directory by ROOT and attempt ids by ATTEMPT.
func (s *planScenario) norm(lines []string) []string {
	root := filepath.Dir(s.e.sourceDir)
	for i, l := range lines {
		l = strings.ReplaceAll(l, "file://"+root, "ROOT")
		l = strings.ReplaceAll(l, root, "ROOT")
		lines[i] = normName(l)
	}
	return lines
}

var (
	uuidRE   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	attTagRE = regexp.MustCompile(`-[0-9a-f]{8}\.(parquet|jsonl|json)`)
)

// normName strips attempt ids and tags from a path.
func normName(p string) string {
	return attTagRE.ReplaceAllString(uuidRE.ReplaceAllString(p, "ATTEMPT"), "-TAG.$1")
}
