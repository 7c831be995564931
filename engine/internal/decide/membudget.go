package decide

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"

	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// The memory budget of a run (state.memory_limit). floe holds an epoch's
// input in memory only where it must:
//
//   - A plan without a keyed stage (the linear form without a window; a
//     graph of filter, project and lookup stages) streams: each file is
//     decoded batch by batch, run through the stateless stages, and encoded
//     into output parts (per sink) rolled at partBytes, with a bounded
//     number of files decoding ahead (stream.go, graphstream.go). Its
//     memory does not grow with the epoch, so the budget never splits its
//     epochs; it sizes the parts and the read-ahead.
//   - A plan with a keyed stage (a window; in a graph also a join, top_n,
//     dedup or over) decodes an epoch's files at once (the stage sees every
//     row before the watermark moves). The decide step takes pending files
//     while their estimated decoded size (by each file's source's format)
//     fits half the budget (at least one file), so a large backlog is split
//     into epochs that fit; a graph's sources share the one budget.
//   - Prefetching the next epoch's files holds at most a quarter of it.
//
// Default: a quarter of the memory the process may use: the cgroup limit
// (cgroup v2 memory.max, v1 memory.limit_in_bytes) when one is set, else
// physical memory (/proc/meminfo), else an assumed 4 GiB.

const (
	// memoryFraction: the default budget is 1/memoryFraction of the machine.
	memoryFraction = 4
	// AssumedMemory is the machine's memory where it cannot be read.
	AssumedMemory = 4 << 30
	// maxPartBytes and minPartBytes bound the size of one output part of a
	// streamed epoch (a 16th of the budget in between).
	maxPartBytes = 32 << 20
	minPartBytes = 1 << 20
)

// MemoryLimitOf returns the run's memory budget in bytes and where it came
// from ("state.memory_limit", "cgroup", "physical memory", "assumed").
func MemoryLimitOf(p *spec.Pipeline) (int64, string) {
	if p.State.MemoryLimit > 0 {
		return p.State.MemoryLimit, "state.memory_limit"
	}
	n, from := MachineMemory(os.ReadFile)
	return max(n/memoryFraction, spec.MinMemoryLimit), "a quarter of the " + from
}

// MachineMemory returns the memory the process may use and its origin,
// reading files with read (os.ReadFile; injected by tests).
func MachineMemory(read func(string) ([]byte, error)) (int64, string) {
	phys := int64(0)
	if data, err := read("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				f := strings.Fields(rest)
				if len(f) >= 1 {
					if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb > 0 {
						phys = kb << 10
					}
				}
			}
		}
	}
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		data, err := read(path)
		if err != nil {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		// "max" (v2) or a huge number (v1's "no limit") is no limit.
		if err != nil || v <= 0 || (phys > 0 && v >= phys) || v >= 1<<62 {
			continue
		}
		return v, "cgroup memory limit"
	}
	if phys > 0 {
		return phys, "physical memory"
	}
	return AssumedMemory, "assumed machine memory (4GiB; set state.memory_limit)"
}

// DecodedEstimate estimates the memory decoding one source file takes: its
// bytes while read plus its decoded batches. Columnar and compressed files
// grow the most when decoded.
func DecodedEstimate(format spec.Format, f store.ObjectInfo) int64 {
	factor := int64(2) // JSON lines, CSV: the text plus about as much decoded
	switch {
	case format == spec.Parquet:
		factor = 5 // compressed, dictionary-encoded columns
	case strings.HasSuffix(f.Key, ".gz") || strings.HasSuffix(f.Key, ".zst") || strings.HasSuffix(f.Key, ".zstd"):
		factor = 10
	}
	return max(f.Size, 1) * factor
}

// PartBytes is the size at which a streamed epoch rolls to a new output
// part: a 16th of the budget, between 1 MiB and 32 MiB.
func PartBytes(limit int64) int64 {
	return min(max(limit/16, minPartBytes), maxPartBytes)
}
