package store_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/s3test"
	"github.com/floe-dev/floe/store"
)

// Environment of a helper process started by raceProcesses.
const (
	envHelper  = "FLOE_STORE_HELPER" // "create" or "cas"
	envURL     = "FLOE_STORE_URL"
	envKeys    = "FLOE_STORE_KEYS"  // comma-separated, one per round
	envETags   = "FLOE_STORE_ETAGS" // cas: comma-separated, one per round
	envID      = "FLOE_STORE_ID"
	envStartAt = "FLOE_STORE_START_AT" // unix nanoseconds of round 0
)

const (
	processes = 4
	// rounds of one race each helper process runs, roundGap apart.
	rounds   = 10
	roundGap = 100 * time.Millisecond
)

// TestHelperProcess is not a test: raceProcesses runs the test binary as
// several OS processes that each execute it once. For every round it prints
// one "RESULT <round> win|lose|error: ..." line.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(envHelper)
	if mode == "" {
		t.Skip("helper process for the cross-process race tests")
	}
	ctx := context.Background()
	s, err := store.Open(ctx, os.Getenv(envURL))
	if err != nil {
		fmt.Println("RESULT 0 error: " + err.Error())
		return
	}
	defer s.Close()
	startAt, err := strconv.ParseInt(os.Getenv(envStartAt), 10, 64)
	if err != nil {
		fmt.Println("RESULT 0 error: " + err.Error())
		return
	}
	keys := strings.Split(os.Getenv(envKeys), ",")
	etags := strings.Split(os.Getenv(envETags), ",")
	for r, key := range keys {
		time.Sleep(time.Until(time.Unix(0, startAt).Add(time.Duration(r) * roundGap)))
		opts := store.PutOptions{IfNotExist: mode == "create"}
		if mode == "cas" {
			opts.IfMatch = etags[r]
		}
		fmt.Printf("RESULT %d %s\n", r, helperPut(ctx, s, key, opts))
	}
}

func helperPut(ctx context.Context, s store.Store, key string, opts store.PutOptions) string {
	body := []byte("process " + os.Getenv(envID))
	for try := 0; ; try++ {
		_, err := s.Put(ctx, key, body, opts)
		switch {
		case err == nil:
			return "win"
		case errors.Is(err, store.ErrPrecondition):
			return "lose"
		case errors.Is(err, store.ErrTransient) && try < 20:
			time.Sleep(10 * time.Millisecond)
		default:
			return "error: " + err.Error()
		}
	}
}

// raceProcesses runs `processes` copies of the test binary that race one
// conditional write per key (with etags: If-Match, else If-None-Match) and
// returns the id of each key's single winner.
func raceProcesses(t *testing.T, url string, keys, etags []string) []int {
	t.Helper()
	mode := "create"
	if etags != nil {
		mode = "cas"
	}
	startAt := time.Now().Add(1500 * time.Millisecond).UnixNano()
	results := make([][]string, processes) // [process][round]
	var wg sync.WaitGroup
	for i := range processes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := make([]string, len(keys))
			for r := range res {
				res[r] = "error: no RESULT line"
			}
			results[i] = res
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(),
				envHelper+"="+mode, envURL+"="+url, envKeys+"="+strings.Join(keys, ","),
				envETags+"="+strings.Join(etags, ","), envID+"="+strconv.Itoa(i),
				envStartAt+"="+strconv.FormatInt(startAt, 10))
			out, err := cmd.CombinedOutput()
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				line, ok := strings.CutPrefix(sc.Text(), "RESULT ")
				if !ok {
					continue
				}
				rs, verdict, _ := strings.Cut(line, " ")
				if r, perr := strconv.Atoi(rs); perr == nil && r >= 0 && r < len(res) {
					res[r] = verdict
				}
			}
			if err != nil {
				res[0] += fmt.Sprintf(" (exit: %v; output:\n%s)", err, out)
			}
		}()
	}
	wg.Wait()
	winners := make([]int, len(keys))
	for r, key := range keys {
		winners[r] = -1
		for i := range processes {
			switch v := results[i][r]; v {
			case "win":
				if winners[r] >= 0 {
					t.Fatalf("%s %s: processes %d and %d both won", mode, key, winners[r], i)
				}
				winners[r] = i
			case "lose":
			default:
				t.Fatalf("%s %s: process %d: %s", mode, key, i, v)
			}
		}
		if winners[r] < 0 {
			t.Fatalf("%s %s: no process won", mode, key)
		}
	}
	return winners
}

func testCrossProcess(t *testing.T, url string) {
	s := openURL(t, url)
	defer s.Close()
	ctx := context.Background()
	check := func(key string, winner int) {
		t.Helper()
		data, _, err := s.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("process %d", winner); string(data) != want {
			t.Fatalf("%s holds %q, the winner wrote %q", key, data, want)
		}
	}
	var creates, cass, etags []string
	for r := range rounds {
		creates = append(creates, fmt.Sprintf("gen=1/epoch=%d/_manifest.json", r))
		key := fmt.Sprintf("p%d/_latest.json", r)
		etag, err := s.Put(ctx, key, []byte("base"), store.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cass, etags = append(cass, key), append(etags, etag)
	}
	for r, w := range raceProcesses(t, url, creates, nil) {
		check(creates[r], w)
	}
	for r, w := range raceProcesses(t, url, cass, etags) {
		check(cass[r], w)
	}
}

func TestCrossProcessFile(t *testing.T) {
	testCrossProcess(t, "file://"+t.TempDir())
}

func TestCrossProcessS3(t *testing.T) {
	testCrossProcess(t, s3test.Shared(t).NewBucket(t))
}
