package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestWorkerFlags: --workers 1 --worker 0 (a Job template scaled down to
// one worker) is accepted as one process; an index out of range, or a
// --worker or --run-id without --workers, is refused naming the flag.
func TestWorkerFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--workers", "1", "--worker", "1"}, "--worker 1: must be in 0..0 with --workers 1"},
		{[]string{"--workers", "3", "--worker", "3"}, "--worker 3: must be in 0..2 with --workers 3"},
		{[]string{"--worker", "0"}, "--worker 0 needs --workers"},
		{[]string{"--run-id", "r"}, "--run-id names a run of several workers: it needs --workers"},
		// accepted: the run goes on to read the spec, which is not there
		{[]string{"--workers", "1", "--worker", "0", "--run-id", "job-1"}, "no-such-spec.yaml"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"run", "no-such-spec.yaml"}, c.args...), &out, &errb)
		if code == 0 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("floe run %s: exit %d, stderr %q; want it to contain %q", strings.Join(c.args, " "), code, errb.String(), c.want)
		}
		if strings.Contains(c.want, "no-such-spec") && strings.Contains(errb.String(), "--worker") {
			t.Errorf("floe run %s refused a flag: %s", strings.Join(c.args, " "), errb.String())
		}
	}
}
