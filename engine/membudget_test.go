package engine

import (
	"context"
	"errors"
	"io/fs"
	"reflect"
	"slices"
	"testing"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/decide"
	"github.com/floe-dev/floe/engine/internal/runner"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// TestMachineMemory: the default budget's base is the cgroup limit when one
// is set (v2, then v1) and below physical memory, else physical memory,
// else an assumed 4 GiB.
func TestMachineMemory(t *testing.T) {
	const meminfo = "MemTotal:       24684084 kB\nMemFree: 1 kB\n"
	phys := int64(24684084) << 10
	for _, c := range []struct {
		name  string
		files map[string]string
		want  int64
		from  string
	}{
		{"cgroup v2", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "2147483648\n"}, 2 << 30, "cgroup memory limit"},
		{"cgroup v2 max", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "max\n"}, phys, "physical memory"},
		{"cgroup v1", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824"}, 1 << 30, "cgroup memory limit"},
		{"cgroup v1 unlimited", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712"}, phys, "physical memory"},
		{"limit above the machine", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "99999999999999"}, phys, "physical memory"},
		{"nothing readable", nil, decide.AssumedMemory, "assumed machine memory (4GiB; set state.memory_limit)"},
	} {
		read := func(name string) ([]byte, error) {
			if v, ok := c.files[name]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		}
		if got, from := decide.MachineMemory(read); got != c.want || from != c.from {
			t.Errorf("%s: %d (%s), want %d (%s)", c.name, got, from, c.want, c.from)
		}
	}
	if got, _ := decide.MachineMemory(func(string) ([]byte, error) { return nil, errors.New("permission denied") }); got != decide.AssumedMemory {
		t.Errorf("unreadable files: %d, want the assumed %d", got, decide.AssumedMemory)
	}
}

func TestMemoryLimitOf(t *testing.T) {
	p := &spec.Pipeline{State: spec.State{MemoryLimit: 512 << 20}}
	if n, from := decide.MemoryLimitOf(p); n != 512<<20 || from != "state.memory_limit" {
		t.Errorf("spec limit: %d %s", n, from)
	}
	p.State.MemoryLimit = 0
	if n, _ := decide.MemoryLimitOf(p); n < spec.MinMemoryLimit {
		t.Errorf("default limit %d is below the minimum", n)
	}
	for limit, want := range map[int64]int64{16 << 20: 1 << 20, 256 << 20: 16 << 20, 8 << 30: 32 << 20, 1 << 20: 1 << 20} {
		if got := decide.PartBytes(limit); got != want {
			t.Errorf("partBytes(%d) = %d, want %d", limit, got, want)
		}
	}
	for _, c := range []struct {
		format spec.Format
		key    string
		want   int64
	}{{spec.JSONL, "a.jsonl", 200}, {spec.CSV, "a.csv", 200}, {spec.Parquet, "a.parquet", 500}, {spec.JSONL, "a.jsonl.gz", 1000}, {spec.CSV, "a.zst", 1000}} {
		if got := decide.DecodedEstimate(c.format, store.ObjectInfo{Key: c.key, Size: 100}); got != c.want {
			t.Errorf("decodedEstimate(%s, %s) = %d, want %d", c.format, c.key, got, c.want)
		}
	}
}

// TestPrefetchBound: the prefetcher starts next-epoch files in order while
// their estimated decoded size fits a quarter of the budget (for a
// streamed plan, at most two output parts' worth), and makes room as the
// epoch takes them.
func TestPrefetchBound(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // nothing is decoded: the test looks at what is started
	files := []store.ObjectInfo{{Key: "a", Size: 10 << 20}, {Key: "b", Size: 10 << 20}, {Key: "c", Size: 10 << 20}, {Key: "d", Size: 1}}
	for _, c := range []struct {
		name   string
		window bool
		want   []string
	}{
		{"windowed: a quarter of 160MiB holds two 20MiB estimates", true, []string{"a", "b"}},
		{"streamed: two 10MiB parts hold one 20MiB estimate", false, []string{"a"}},
	} {
		gp := &dataflow.GraphPlan{}
		if c.window {
			gp.State = []*dataflow.Node{{Name: "w", Kind: spec.KindWindow, Stateful: true}}
		}
		r := &runner.Runner{P: &spec.Pipeline{Source: spec.Source{Format: spec.JSONL}}, Plan: &dataflow.Plan{Graph: gp}, Dc: decide.Config{MemLimit: 160 << 20}}
		pf := runner.NewPrefetcher(ctx, r)
		pf.Sem = make(chan struct{}) // never free: the started decodes end on the cancelled context
		pf.Start(files)
		var got []string
		for k := range pf.M {
			got = append(got, k)
		}
		slices.Sort(got)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: started %v, want %v", c.name, got, c.want)
		}
		if c.window {
			pf.Take(ctx, "a")
			pf.Start(files[2:])
			if _, ok := pf.M["c"]; !ok || pf.Held != 40<<20 {
				t.Errorf("%s: after a was taken, c not started (held %d)", c.name, pf.Held)
			}
		}
		pf.Stop()
	}
}

// TestDecideConfigStreams: only a plan without a window and outside the
// graph form streams; the others are split by the budget.
func TestDecideConfigStreams(t *testing.T) {
	filter := &spec.Pipeline{Operators: []spec.Operator{{Filter: &spec.Filter{Expr: "x > 1"}}}}
	window := &spec.Pipeline{Operators: []spec.Operator{{Filter: &spec.Filter{Expr: "x > 1"}}, {Window: &spec.Window{}}}}
	graph := &spec.Pipeline{Stages: []spec.Stage{{}}}
	for p, want := range map[*spec.Pipeline]bool{filter: true, window: false, graph: false} {
		if c := decide.NewConfig(p); c.Streams != want || c.MemLimit < spec.MinMemoryLimit || c.SplitNoted == nil {
			t.Errorf("%+v: streams %v (want %v), limit %d", p, c.Streams, want, c.MemLimit)
		}
	}
}

// TestDecideConfigGraphStreams: a graph whose stages are all filter,
// project and lookup stages streams (the budget does not split it); one
// keyed stage makes it decode its epochs at once, split by the budget,
// each file estimated by its own source's format (a Parquet file decodes
// to about 5 times its size, JSON lines to 2).
func TestDecideConfigGraphStreams(t *testing.T) {
	srcs := []spec.NamedSource{{Name: "a", Source: spec.Source{Format: spec.JSONL}}, {Name: "b", Source: spec.Source{Format: spec.Parquet}}}
	stateless := []spec.Stage{{Filter: &spec.Filter{Expr: "x > 1"}}, {Project: &spec.Project{}}, {Lookup: &spec.Lookup{}}}
	for _, c := range []struct {
		name   string
		stages []spec.Stage
		want   bool
	}{
		{"filter, project, lookup", stateless, true},
		{"and a window", append(slices.Clone(stateless), spec.Stage{Window: &spec.Window{}}), false},
		{"and a dedup", append(slices.Clone(stateless), spec.Stage{Dedup: &spec.Dedup{}}), false},
	} {
		p := &spec.Pipeline{Source: spec.Source{Format: spec.JSONL, Inputs: spec.InputsDirectory}, Sources: srcs, Stages: c.stages}
		if got := decide.NewConfig(p).Streams; got != c.want {
			t.Errorf("%s: streams %v, want %v", c.name, got, c.want)
		}
	}
	p := &spec.Pipeline{Source: spec.Source{Format: spec.JSONL, Inputs: spec.InputsDirectory}, Sources: srcs,
		Stages: []spec.Stage{{Window: &spec.Window{}}}, State: spec.State{MemoryLimit: 100 << 20}}
	c := decide.NewConfig(p)
	files := []store.ObjectInfo{{Key: "a/1", Size: 10 << 20}, {Key: "b/1", Size: 5 << 20}, {Key: "a/2", Size: 1 << 20}}
	if a, b := c.Estimate(files[0]), c.Estimate(files[1]); a != 20<<20 || b != 25<<20 {
		t.Fatalf("estimates %d and %d, want 20MiB (JSON lines) and 25MiB (Parquet)", a, b)
	}
	// Half of 100MiB holds a/1, b/1 and a/2 (47MiB), not b/2 as well (52MiB);
	// with the Parquet files estimated as JSON lines all four would fit (34MiB).
	if cut := c.MemorySplit(files); cut.Split || cut.Estimate != 47<<20 {
		t.Fatalf("cut %+v, want all three files (47MiB estimated)", cut)
	}
	files = append(files, store.ObjectInfo{Key: "b/2", Size: 1 << 20})
	if cut := c.MemorySplit(files); !cut.Split || cut.Files != 3 || cut.Remaining != 5<<20 {
		t.Fatalf("cut %+v, want three files taken and b/2 (5MiB estimated) left", cut)
	}
}
