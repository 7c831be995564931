package cluster_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/floe-dev/floe/cluster"
	"github.com/floe-dev/floe/store"
)

// protoCounter counts the requests that are the protocol's (decision, idle
// note, exchange objects, parts, manifest, pointer, generation checks)
// apart from the simulation's own work (input, state, outputs).
type protoCounter struct {
	store.Store
	puts, gets atomic.Int64
}

func protocolKey(k string) bool {
	return strings.Contains(k, "/x/") || strings.HasSuffix(k, "/_decision.json") || strings.HasSuffix(k, "/_idle.json") ||
		strings.HasSuffix(k, "/_manifest.json") || k == "_latest.json" || strings.HasSuffix(k, "/_generation.json")
}

func (c *protoCounter) Get(ctx context.Context, key string) ([]byte, string, error) {
	if protocolKey(key) {
		c.gets.Add(1)
	}
	return c.Store.Get(ctx, key)
}

func (c *protoCounter) Put(ctx context.Context, key string, data []byte, opts store.PutOptions) (string, error) {
	if protocolKey(key) {
		c.puts.Add(1)
	}
	return c.Store.Put(ctx, key, data, opts)
}

func (c *protoCounter) ReadRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if protocolKey(key) {
		c.gets.Add(1)
	}
	return store.ReadRange(ctx, c.Store, key, off, n)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSimulation runs the simulation (2 rounds an epoch, 32 files of
// up to 40 rows an epoch, no kills) on file:// with W = 2, 4, 8, 16
// goroutine workers and reports per epoch: the protocol's requests as
// counted (polls included) and as the cost model's minimum, and the CPU
// time per worker. The machine is shared; take the figures as rough.
func BenchmarkSimulation(b *testing.B) {
	for _, w := range []int{2, 4, 8, 16} {
		b.Run(fmt.Sprintf("W=%d", w), func(b *testing.B) {
			var puts, gets int64
			var cpu time.Duration
			epochs := 0
			for b.Loop() {
				b.StopTimer()
				pc := &protoCounter{Store: open(b, "file://"+b.TempDir())}
				s := &sim{st: pc, topo: cluster.Topology{Workers: w, Parallelism: 16, MaxParallelism: 128}, epochs: 4, perEpoch: 32, seed: 1}
				s.input(b, rand.New(rand.NewPCG(1, 2)))
				pc.puts.Store(0)
				pc.gets.Store(0)
				c0 := cpuTime()
				b.StartTimer()
				s.run(b, 0)
				b.StopTimer()
				cpu += cpuTime() - c0
				puts += pc.puts.Load()
				gets += pc.gets.Load()
				epochs += s.epochs
				b.StartTimer()
			}
			model := cluster.Protocol(cluster.Shape{Workers: w, Parallelism: 16, Rounds: 2})
			b.ReportMetric(float64(puts)/float64(epochs), "proto-puts/epoch")
			b.ReportMetric(float64(gets)/float64(epochs), "proto-gets/epoch")
			b.ReportMetric(float64(model.Puts), "model-puts/epoch")
			b.ReportMetric(float64(model.Gets), "model-gets/epoch")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(epochs*w), "cpu-ms/worker/epoch")
		})
	}
}
