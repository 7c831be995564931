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
	c, err := Start(ctx, kind, job, out, stderr, nil)
	if err != nil {
		return 0, err
	}
	rss, sec, err := c.Wait()
	if err != nil {
		return 0, err
	}
	if cpu != nil {
		*cpu = append(*cpu, sec)
	}
	return rss, nil
}

// Child is a running child process of Start.
type Child struct {
	kind string
	cmd  *exec.Cmd
	buf  bytes.Buffer
	out  any
}

// Start re-executes this binary as a child running job (--child kind
// --job JSON) with env added to this process's environment (e.g.
// "GOMAXPROCS=1"), and returns without waiting for it; Wait decodes its
// result into out.
func Start(ctx context.Context, kind string, job, out any, stderr io.Writer, env []string) (*Child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("spawn %s: %w", kind, err)
	}
	data, err := json.Marshal(job)
	if err != nil {
		return nil, fmt.Errorf("spawn %s: %w", kind, err)
	}
	c := &Child{kind: kind, out: out}
	c.cmd = exec.CommandContext(ctx, self, "--child", kind, "--job", string(data))
	c.cmd.Stdout, c.cmd.Stderr = &c.buf, stderr
	if len(env) > 0 {
		c.cmd.Env = append(os.Environ(), env...)
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("spawn %s: %w", kind, err)
	}
	return c, nil
}

// Wait waits for the child to exit, decodes its result, and returns its
// peak RSS (VmHWM) in MiB and its CPU time (user+sys, all threads) in
// seconds.
func (c *Child) Wait() (rssMiB, cpuSec float64, err error) {
	if err := c.cmd.Wait(); err != nil {
		return 0, 0, fmt.Errorf("%s child: %w", c.kind, err)
	}
	cr := childResult{Result: c.out}
	if err := json.Unmarshal(c.buf.Bytes(), &cr); err != nil {
		return 0, 0, fmt.Errorf("%s child: result: %w", c.kind, err)
	}
	ps := c.cmd.ProcessState
	return float64(cr.PeakRSSKiB) / 1024, (ps.UserTime() + ps.SystemTime()).Seconds(), nil
}
