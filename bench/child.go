package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// The benchmark commands run each engine in a child process (the command
// re-executed with --child KIND --job JSON), so that every measurement
// has its own peak RSS and CPU time.

// childResult is what a child writes on stdout.
type childResult struct {
	Result     any
	PeakRSSKiB int64
}

// WriteChildResult writes a child's result and its peak RSS to w: the last
// thing a child does.
func WriteChildResult(w io.Writer, res any) error {
	hwm, err := peakRSS()
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(childResult{Result: res, PeakRSSKiB: hwm})
}

// peakRSS returns this process's peak resident set size (VmHWM) in KiB.
// Unlike the wait4 rusage of a child, VmHWM starts afresh at exec: on Linux
// the child's ru_maxrss also counts the parent's RSS at fork/exec time.
func peakRSS() (int64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("peak RSS: %w", err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kib int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kib); err != nil {
				return 0, fmt.Errorf("peak RSS: %q: %w", l, err)
			}
			return kib, nil
		}
	}
	return 0, errors.New("peak RSS: no VmHWM in /proc/self/status")
}

// Spawn re-executes this binary as a child running job (--child kind
// --job JSON) and decodes its result into out; it returns the child's peak
// RSS (VmHWM) in MiB. The child's CPU time (user+sys, all threads) is
// appended to *cpu when cpu != nil.
func Spawn(ctx context.Context, kind string, job, out any, stderr io.Writer, cpu *[]float64) (float64, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("spawn %s: %w", kind, err)
	}
	data, err := json.Marshal(job)
	if err != nil {
		return 0, fmt.Errorf("spawn %s: %w", kind, err)
	}
	cmd := exec.CommandContext(ctx, self, "--child", kind, "--job", string(data))
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%s child: %w", kind, err)
	}
	cr := childResult{Result: out}
	if err := json.Unmarshal(buf.Bytes(), &cr); err != nil {
		return 0, fmt.Errorf("%s child: result: %w", kind, err)
	}
	if cpu != nil {
		*cpu = append(*cpu, (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds())
	}
	return float64(cr.PeakRSSKiB) / 1024, nil
}
