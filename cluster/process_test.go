package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/floe-dev/floe/cluster"
	"github.com/floe-dev/floe/internal/s3test"
)

// Environment of a worker process started by TestProcessKills.
const (
	envSimURL    = "FLOE_SIM_URL"
	envSimWorker = "FLOE_SIM_WORKER"
	envSimTopo   = "FLOE_SIM_TOPOLOGY" // W,P,K
	envSimEpochs = "FLOE_SIM_EPOCHS"   // epochs,files per epoch
)

// TestSimWorkerProcess is not a test: TestProcessKills runs the test
// binary as worker processes, each executing it once as one worker of the
// simulation (sim.worker) until the last epoch is committed.
func TestSimWorkerProcess(t *testing.T) {
	url := os.Getenv(envSimURL)
	if url == "" {
		t.Skip("worker process of TestProcessKills")
	}
	var topo cluster.Topology
	var epochs, perEpoch, idx int
	if _, err := fmt.Sscanf(os.Getenv(envSimTopo), "%d,%d,%d", &topo.Workers, &topo.Parallelism, &topo.MaxParallelism); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscanf(os.Getenv(envSimEpochs), "%d,%d", &epochs, &perEpoch); err != nil {
		t.Fatal(err)
	}
	idx, err := strconv.Atoi(os.Getenv(envSimWorker))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := open(t, url)
	objs, err := st.List(ctx, "src/")
	if err != nil {
		t.Fatal(err)
	}
	s := &sim{st: st, topo: topo, epochs: epochs, perEpoch: perEpoch}
	for _, o := range objs {
		s.files = append(s.files, cluster.File{Key: o.Key, Size: o.Size})
	}
	if err := s.worker(ctx, idx, st); err != nil {
		t.Fatal(err)
	}
}

// TestProcessKills runs the simulation (30 epochs of two rounds) as W = 4
// OS processes on file:// and on the real S3 server, SIGKILLs a random
// worker process every 20 to 120 ms (at any instruction: in the middle of
// a write, between a write and its read-back, while waiting at a barrier)
// and starts the same index again, 15 times, then lets them finish: the
// same checks as TestSimulationKills.
func TestProcessKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	for name, url := range map[string]func(t *testing.T) string{
		"file": func(t *testing.T) string { return "file://" + t.TempDir() },
		"s3":   func(t *testing.T) string { return s3test.Shared(t).NewBucket(t) },
	} {
		t.Run(name, func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 3))
			u := url(t)
			s := &sim{st: open(t, u), topo: cluster.Topology{Workers: 4, Parallelism: 6, MaxParallelism: 64}, epochs: 30, perEpoch: 8}
			wantKeys, wantBuckets := s.input(t, rand.New(rand.NewPCG(seed, 4)))

			type proc struct {
				cmd  *exec.Cmd
				out  *bytes.Buffer
				done chan error
			}
			start := func(i int) *proc {
				cmd := exec.Command(os.Args[0], "-test.run=^TestSimWorkerProcess$", "-test.count=1")
				cmd.Env = append(os.Environ(), envSimURL+"="+u, envSimWorker+"="+strconv.Itoa(i),
					fmt.Sprintf("%s=%d,%d,%d", envSimTopo, s.topo.Workers, s.topo.Parallelism, s.topo.MaxParallelism),
					fmt.Sprintf("%s=%d,%d", envSimEpochs, s.epochs, s.perEpoch))
				p := &proc{cmd: cmd, out: new(bytes.Buffer), done: make(chan error, 1)}
				cmd.Stdout, cmd.Stderr = p.out, p.out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				go func() { p.done <- cmd.Wait() }()
				return p
			}
			procs := make([]*proc, s.topo.Workers)
			for i := range procs {
				procs[i] = start(i)
			}
			finished := func(p *proc) bool {
				select {
				case err := <-p.done:
					p.done <- err
					return true
				default:
					return false
				}
			}
			kills := 0
			for kills < 15 && slices.ContainsFunc(procs, func(p *proc) bool { return !finished(p) }) {
				time.Sleep(time.Duration(20+rng.IntN(100)) * time.Millisecond)
				i := rng.IntN(len(procs))
				if p := procs[i]; !finished(p) {
					_ = p.cmd.Process.Signal(syscall.SIGKILL)
					<-p.done
					procs[i] = start(i)
					kills++
				}
			}
			deadline := time.After(3 * time.Minute)
			for i, p := range procs {
				select {
				case err := <-p.done:
					if err != nil {
						t.Fatalf("worker %d: %v\n%s", i, err, tail(p.out.String()))
					}
				case <-deadline:
					for _, q := range procs {
						_ = q.cmd.Process.Kill()
					}
					t.Fatalf("worker %d did not finish:\n%s", i, tail(p.out.String()))
				}
			}
			t.Logf("%d SIGKILLs", kills)
			if kills < 5 {
				t.Fatalf("only %d SIGKILLs before the workers finished: the test tested too little", kills)
			}
			s.check(t, wantKeys, wantBuckets)
		})
	}
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}
