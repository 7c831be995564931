package operators

import (
	"math/rand/v2"
)

// op is one step of a random stream: process rows, advance the watermark,
// or (p > 0) rescale / checkpoint, as the test using it decides.
type op struct {
	rows    []ev
	wm      int64
	advance bool
	p       int
}

// randomStream returns n random steps over a few keys (one of them null),
// with out-of-order event times around a slowly moving clock, so that rows
// are on time, within allowed lateness or late. Float values are multiples
// of 1/4, exact in binary, so float sums do not depend on addition order.
func randomStream(rng *rand.Rand, n int) []op {
	users := []*string{sp("ann"), sp("bob"), sp("cy"), sp("dee"), sp("eve"), sp("fay"), nil}
	strs := []*string{sp("x"), sp("y"), sp("z"), sp(""), nil}
	clock := int64(-50)
	var ops []op
	for range n {
		switch k := rng.IntN(10); {
		case k < 6:
			var rows []ev
			for range 1 + rng.IntN(30) {
				e := ev{ts: clock + int64(rng.IntN(40)) - 30, user: users[rng.IntN(len(users))], s: strs[rng.IntN(len(strs))]}
				if rng.IntN(4) > 0 {
					e.n = ip(int64(rng.IntN(100) - 20))
				}
				if rng.IntN(3) > 0 {
					e.f = fp(float64(rng.IntN(50)) / 4)
				}
				if rng.IntN(3) > 0 {
					e.i32 = i32p(int32(rng.IntN(1000) - 500))
				}
				rows = append(rows, e)
			}
			clock += int64(rng.IntN(6))
			ops = append(ops, op{rows: rows})
		case k < 9:
			ops = append(ops, op{wm: clock - int64(rng.IntN(25)), advance: true})
		default:
			ops = append(ops, op{p: 1 + rng.IntN(7)})
		}
	}
	return ops
}
