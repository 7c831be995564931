package cluster

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/floe-dev/floe/keygroup"
)

// TestTopologyRanges: for many (W, P, K) the workers' subtask and
// key-group ranges are non-empty, contiguous and partition [0, P) and
// [0, K) in worker order, and WorkerOfSubtask / WorkerOfKeyGroup agree
// with them.
func TestTopologyRanges(t *testing.T) {
	for _, k := range []int{1, 7, 128, 1000} {
		for p := 1; p <= min(k, 40); p++ {
			for w := 1; w <= p; w++ {
				topo := Topology{Workers: w, Parallelism: p, MaxParallelism: k}
				if err := topo.Validate(); err != nil {
					t.Fatal(err)
				}
				nextS, nextG := 0, 0
				for i := range w {
					slo, shi := topo.Subtasks(i)
					glo, ghi := topo.KeyGroups(i)
					if slo != nextS || shi <= slo || glo != nextG || ghi <= glo {
						t.Fatalf("%s worker %d: subtasks [%d,%d) key groups [%d,%d), want to start at %d, %d", topo, i, slo, shi, glo, ghi, nextS, nextG)
					}
					for s := slo; s < shi; s++ {
						if topo.WorkerOfSubtask(s) != i {
							t.Fatalf("%s: WorkerOfSubtask(%d) = %d, want %d", topo, s, topo.WorkerOfSubtask(s), i)
						}
					}
					for g := glo; g < ghi; g++ {
						if topo.WorkerOfKeyGroup(g) != i {
							t.Fatalf("%s: WorkerOfKeyGroup(%d) = %d, want %d", topo, g, topo.WorkerOfKeyGroup(g), i)
						}
						if s := keygroup.SubtaskOf(g, p, k); s < slo || s >= shi {
							t.Fatalf("%s: key group %d is subtask %d's, not in worker %d's [%d,%d)", topo, g, s, i, slo, shi)
						}
					}
					nextS, nextG = shi, ghi
				}
				if nextS != p || nextG != k {
					t.Fatalf("%s: ranges end at %d, %d", topo, nextS, nextG)
				}
			}
		}
	}
}

func TestTopologyValidate(t *testing.T) {
	for _, topo := range []Topology{{0, 4, 128}, {5, 4, 128}, {2, 0, 128}, {2, 200, 128}, {1, 1, 0}, {1, 1, keygroup.Max + 1}} {
		if err := topo.Validate(); err == nil {
			t.Errorf("%s accepted", topo)
		}
	}
}

// TestAssignFiles: the split is contiguous in the given order, uses only
// worker indexes in range, is deterministic, and gives every worker bytes
// within one largest file of total/W.
func TestAssignFiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		n := rng.IntN(60)
		w := 1 + rng.IntN(20)
		files := make([]File, n)
		var total, largest int64
		for i := range files {
			size := rng.Int64N(1 << 20)
			if rng.IntN(10) == 0 {
				size = 0
			}
			files[i] = File{Key: fmt.Sprintf("f%03d", i), Size: size}
			total += max(size, 1)
			largest = max(largest, max(size, 1))
		}
		got := AssignFiles(files, w)
		again := AssignFiles(files, w)
		bytesOf := make([]int64, w)
		for i, f := range got {
			if f != again[i] {
				t.Fatal("not deterministic")
			}
			if f.Key != files[i].Key || f.Size != files[i].Size {
				t.Fatalf("file %d: %+v, want %+v", i, f, files[i])
			}
			if f.Worker < 0 || f.Worker >= w {
				t.Fatalf("worker %d out of range", f.Worker)
			}
			if i > 0 && f.Worker < got[i-1].Worker {
				t.Fatalf("not contiguous: file %d to worker %d after worker %d", i, f.Worker, got[i-1].Worker)
			}
			bytesOf[f.Worker] += max(f.Size, 1)
		}
		for i, b := range bytesOf {
			if share := total / int64(w); b > share+largest {
				t.Fatalf("W=%d worker %d has %d bytes, share %d, largest file %d", w, i, b, share, largest)
			}
		}
	}
	// Equal files: equal counts.
	files := make([]File, 64)
	for i := range files {
		files[i] = File{Key: fmt.Sprint(i), Size: 100}
	}
	count := map[int]int{}
	for _, f := range AssignFiles(files, 8) {
		count[f.Worker]++
	}
	for w := range 8 {
		if count[w] != 8 {
			t.Fatalf("64 equal files among 8 workers: %v", count)
		}
	}
}

func TestOwners(t *testing.T) {
	got := Topology{Workers: 3, Parallelism: 4, MaxParallelism: 128}.Owners()
	want := []Owner{{0, 0, 2, 0, 64}, {1, 2, 3, 64, 96}, {2, 3, 4, 96, 128}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Owners = %v, want %v", got, want)
	}
}
