package cluster

import (
	"testing"
	"time"
)

// A wait's next poll comes a quarter of the wait later, within the bounds:
// a peer is seen at most a quarter of the wait late, and a long wait costs
// one GET per PollMax.
func TestPollDelay(t *testing.T) {
	w := &Worker{cfg: Config{PollMin: 5 * time.Millisecond, PollMax: time.Second}}
	for _, c := range []struct{ waited, want time.Duration }{
		{0, 5 * time.Millisecond},
		{12 * time.Millisecond, 5 * time.Millisecond},
		{100 * time.Millisecond, 25 * time.Millisecond},
		{2 * time.Second, 500 * time.Millisecond},
		{time.Hour, time.Second},
	} {
		if got := w.pollDelay(c.waited); got != c.want {
			t.Errorf("pollDelay(%v) = %v, want %v", c.waited, got, c.want)
		}
	}
	// The polls of a 60 s wait: about 84, a quarter more than doubling's
	// 67 (8 to reach PollMax, then one a second), never one per PollMin.
	polls, at := 0, time.Duration(0)
	for at < time.Minute {
		at += w.pollDelay(at)
		polls++
	}
	if polls > 90 {
		t.Errorf("a 60 s wait polls %d times, want at most 90", polls)
	}
}
