package engine

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/engine/internal/decide"
	"github.com/floe-dev/floe/engine/internal/runner"
	"github.com/floe-dev/floe/engine/internal/sources"
	"github.com/floe-dev/floe/internal/scenario"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// TestDecideScenarios runs the scenario files in testdata/decide
// (internal/scenario; `go test ./engine -run DecideScenarios -rewrite`
// rewrites their expected outputs). Commands:
//
//	config [directory] [max_files=N] [ooo=DUR] [idle=DUR] [memory=SIZE] [format=F] [stream]
//	                 memory is state.memory_limit (none by default), format the
//	                 source format (jsonl), stream a window-less plan
//	list             the source listing (one "key [size=SIZE]" per line); prints the pending order
//	select           prints the files the next epoch takes, and how the memory budget cut them
//	read now=HH:MM:SS [drain]   reads the selected files; input lines "key maxts=HH:MM:SS|none";
//	                 prints the watermark, whether it commits and every input
//	idle now=HH:MM:SS           an epoch without files (trigger mode, nothing new)
//	drain now=HH:MM:SS          the end of the input: an epoch without files that drains
//
// Times are on 2024-01-01 UTC; the scenario state (inputs, watermark, the
// processed set) carries over from block to block as committed epochs would.
func TestDecideScenarios(t *testing.T) {
	for _, f := range scenario.Files(t, "testdata/decide/*.txt") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s := &decideScenario{seen: map[string]bool{}, inputs: map[string]manifest.InputState{}, wm: manifest.NoWatermark}
			scenario.Run(t, f, func(t *testing.T, b *scenario.Block) []string { return s.exec(t, *b) })
		})
	}
}

type decideScenario struct {
	cfg    decide.Config
	seen   map[string]bool
	list   []store.ObjectInfo
	pend   []store.ObjectInfo
	inputs map[string]manifest.InputState
	wm     int64
}

type block = scenario.Block

var scenarioDay = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func clock(t *testing.T, v string) time.Time {
	d, err := time.Parse("15:04:05", v)
	if err != nil {
		t.Fatalf("time %q: %v", v, err)
	}
	return scenarioDay.Add(time.Duration(d.Hour())*time.Hour + time.Duration(d.Minute())*time.Minute + time.Duration(d.Second())*time.Second)
}

func args(fields []string) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}

func (s *decideScenario) exec(t *testing.T, b block) []string {
	fields := strings.Fields(b.Cmd)
	a := args(fields[1:])
	dur := func(k string) time.Duration {
		if a[k] == "" {
			return 0
		}
		d, err := time.ParseDuration(a[k])
		if err != nil {
			t.Fatalf("%s: %v", b.Cmd, err)
		}
		return d
	}
	switch fields[0] {
	case "config":
		_, dir := a["directory"]
		n, _ := strconv.Atoi(a["max_files"])
		_, stream := a["stream"]
		s.cfg = decide.Config{ByDirectory: dir, MaxFiles: n, Ooo: dur("ooo"), Idle: dur("idle"),
			MemLimit: size(t, a["memory"]), Format: spec.Format(a["format"]), Streams: stream}
		if v, ok := a["max_files_of"]; ok {
			s.cfg.MaxFilesOf = map[string]int{}
			for _, kv := range strings.Split(v, ",") {
				name, l, _ := strings.Cut(kv, ":")
				s.cfg.MaxFilesOf[name], _ = strconv.Atoi(l)
			}
		}
		if s.cfg.Format == "" {
			s.cfg.Format = spec.JSONL
		}
		return []string{"ok"}
	case "list":
		s.list = nil
		for _, l := range b.Input {
			f := strings.Fields(l)
			s.list = append(s.list, store.ObjectInfo{Key: f[0], Size: size(t, args(f[1:])["size"])})
		}
		sort.Slice(s.list, func(i, j int) bool { return s.list[i].Key < s.list[j].Key })
		s.pend = s.cfg.Interleave(sources.PendingFiles(s.list, func(k string) bool { return s.seen[k] }))
		return keysOf(s.pend)
	case "select":
		out := keysOf(s.cfg.SelectFiles(s.pend))
		if cut := s.cfg.MemorySplit(s.pend[:s.cfg.Limit(s.pend)]); cut.Split {
			out = append(out, fmt.Sprintf("split by memory_limit: %d of %d files, estimated %s of a %s budget, %s left",
				cut.Files, cut.Offered, spec.FormatSize(cut.Estimate), spec.FormatSize(cut.Budget), spec.FormatSize(cut.Remaining)))
		}
		return out
	case "read", "idle", "drain":
		now := clock(t, a["now"])
		var obs []decide.FileObs
		taken := 0
		if fields[0] == "read" {
			sel := s.cfg.SelectFiles(s.pend)
			byKey := map[string]int64{}
			for _, l := range b.Input {
				f := strings.Fields(l)
				ts := int64(math.MinInt64)
				if v := args(f[1:])["maxts"]; v != "none" {
					ts = clock(t, v).UnixMicro()
				}
				byKey[f[0]] = ts
			}
			for _, f := range sel {
				ts, ok := byKey[f.Key]
				if !ok {
					t.Fatalf("%s: no maxts given for selected file %s", b.Cmd, f.Key)
				}
				obs = append(obs, decide.FileObs{Key: f.Key, MaxTS: ts})
			}
			taken = len(sel)
		}
		_, drain := a["drain"]
		d := s.cfg.Decide(s.inputs, s.wm, obs, now, s.pend, taken, drain || fields[0] == "drain", fields[0] == "idle")
		lines := []string{fmt.Sprintf("watermark %s commit=%v", runner.FmtWM(d.Watermark), d.Commit)}
		names := make([]string, 0, len(d.Inputs))
		for n := range d.Inputs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			in := d.Inputs[n]
			lines = append(lines, fmt.Sprintf("input %s max=%s active=%s", n, runner.FmtWM(in.MaxEventTime), in.LastActive.Format("15:04:05")))
		}
		if d.Commit {
			for _, o := range obs {
				s.seen[o.Key] = true
			}
			s.pend = s.pend[taken:]
			s.inputs, s.wm = d.Inputs, d.Watermark
		}
		return lines
	}
	t.Fatalf("unknown command %q", b.Cmd)
	return nil
}

// size parses a scenario size ("" is 0).
func size(t *testing.T, v string) int64 {
	if v == "" {
		return 0
	}
	n, err := spec.ParseSize(v)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func keysOf(fs []store.ObjectInfo) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.Key)
	}
	if len(out) == 0 {
		return []string{"(none)"}
	}
	return out
}
