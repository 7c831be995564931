package store_test

import (
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/faultproxy"
	"github.com/floe-dev/floe/store"
	"github.com/floe-dev/floe/store/storetest"
)

// TestConformanceS3Faults runs the conformance suite through WithRetry
// against a real S3 server behind a proxy that faults 20% of the requests:
// 503 SlowDown, 500, connection resets, stalls, lost and torn responses,
// bodies that stop half-way, slow bodies. Faults that apply a request and
// hide its outcome (lost, torn, stalled body) are kept off conditional
// writes: on those the suite's exactly-one-winner checks would rightly see
// ErrOutcomeUnknown (TestLostResponseConditionalWrite covers that case).
func TestConformanceS3Faults(t *testing.T) {
	const seed = 20240611
	t.Logf("fault seeds %d + subtest index", seed)
	var proxies []*faultproxy.Proxy
	storetest.Run(t, func(t *testing.T) store.Store {
		p, via, _ := proxied(t)
		// A seed per subtest, so that each sees its own fault sequence.
		p.SetRandom(faultproxy.Random{P: 0.2, Seed: seed + uint64(len(proxies)), Kinds: faultproxy.AllKinds})
		proxies = append(proxies, p)
		t.Cleanup(func() { t.Logf("%d requests; faults: %s", total(p.Counts()), p.FaultSummary()) })
		return store.WithRetry(openURL(t, via), store.RetryPolicy{
			// Not shorter: a conditional write whose answer takes longer
			// (a loaded machine) would rightly be ErrOutcomeUnknown and
			// fail the suite's race checks. Each stall costs this much.
			RequestTimeout: time.Second, IdleTimeout: time.Second, MaxElapsed: 30 * time.Second,
			BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond, Seed: seed,
		})
	})
	faults := 0
	for _, p := range proxies {
		for _, n := range p.Faults() {
			faults += n
		}
	}
	if faults == 0 {
		t.Fatal("no fault injected")
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
