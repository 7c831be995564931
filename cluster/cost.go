package cluster

import (
	"fmt"
	"strings"
	"time"
)

// S3 request prices (us-east-1, S3 Standard), dollars per request.
const (
	PricePut = 0.005 / 1000  // PUT, COPY, POST, LIST
	PriceGet = 0.0004 / 1000 // GET, HEAD (and a ranged GET)
)

// Shape is what an epoch's request count depends on.
type Shape struct {
	Workers     int // W
	Parallelism int // P
	Files       int // input files in the epoch (F)
	Rounds      int // exchange rounds: keyed stages whose input crosses workers (R)
}

// Requests is a request count by price class.
type Requests struct {
	Puts, Gets, Lists int64
}

// Dollars prices r at S3's request prices.
func (r Requests) Dollars() float64 {
	return float64(r.Puts+r.Lists)*PricePut + float64(r.Gets)*PriceGet
}

// Add returns r plus o.
func (r Requests) Add(o Requests) Requests {
	return Requests{r.Puts + o.Puts, r.Gets + o.Gets, r.Lists + o.Lists}
}

// Protocol returns the requests the coordination of one epoch adds to the
// work one process does for the same input, when no barrier has to poll
// (every peer's object is there at the first look) and every exchange
// segment needs its own ranged GET (the upper bound: a segment inside the
// header's first read costs none). With one worker there is no
// coordination: the engine runs as a single process.
//
//	decision   worker 0: GET (absent), 2 fence GETs, 1 PUT; others: 1 GET each
//	round      each worker: 1 PUT; per other sender 1 header GET + 1 segment GET
//	outputs    each worker: 2 fence GETs (Epoch.Fence, before it writes state and outputs)
//	parts      each worker: 1 PUT
//	commit     worker 0: W part GETs, 2 fence GETs, 1 manifest PUT; others: 1 manifest GET
//
// PUT = W(R+1) + 2, GET = 2RW(W-1) + 5W + 3.
func Protocol(s Shape) Requests {
	w, r := int64(s.Workers), int64(s.Rounds)
	if w <= 1 {
		return Requests{}
	}
	return Requests{
		Puts: w*(r+1) + 2,
		Gets: 2*r*w*(w-1) + 5*w + 3,
	}
}

// Work returns what the epoch's own work costs, the same for one process
// or W: one LIST of the source (a page per 1,000 keys, taken as one), a GET
// per input file, and per subtask one state file and one output (PUTs),
// plus the manifest and the pointer swap (a GET and a PUT) of a single
// process' commit.
func Work(s Shape) Requests {
	p := int64(s.Parallelism)
	return Requests{Puts: 2*p + 2, Gets: int64(s.Files) + 1, Lists: 1}
}

// Latency is the model of one barrier's wait once the last peer is done:
// its object's PUT, the time until a waiting worker polls again (half the
// poll interval on average, at most PollMax), and the reads of the
// barrier's objects, Fanout at a time.
type Latency struct {
	Put, Get time.Duration // one small PUT, one GET's first byte
	Poll     time.Duration // the poll interval at that moment
	Fanout   int
}

// DefaultLatency is S3 Standard from within its region: a small PUT about
// 50 ms, a GET's first byte about 20 ms; the poll interval at its minimum.
var DefaultLatency = Latency{Put: 50 * time.Millisecond, Get: 20 * time.Millisecond, Poll: DefaultPollMin, Fanout: DefaultFanout}

// Barrier returns the wait of one barrier whose reads are reads per
// waiting worker.
func (l Latency) Barrier(reads int) time.Duration {
	waves := (reads + l.Fanout - 1) / l.Fanout
	return l.Put + l.Poll/2 + time.Duration(waves)*l.Get
}

// EpochLatency is the coordination latency an epoch adds: the decision
// barrier (1 read), R exchange barriers (2(W-1) reads: headers, then
// segments), the fence before the outputs (2 GETs), and the commit barrier (W part reads, the manifest PUT, and
// one more poll for the others to see it).
func (l Latency) EpochLatency(s Shape) time.Duration {
	if s.Workers <= 1 {
		return 0
	}
	w := s.Workers
	d := l.Barrier(1)
	for range s.Rounds {
		// headers and segments are two waves of reads each
		d += l.Put + l.Poll/2 + time.Duration(2*((w-1+l.Fanout-1)/l.Fanout))*l.Get
	}
	d += 2 * l.Get // Epoch.Fence before the state and outputs
	d += l.Barrier(w) + l.Put + l.Poll/2 + l.Get
	return d
}

// CostTable is the table docs/workers.md shows: for W = 1, 8, 64, 256 with
// P = max(8, W), F files and R rounds, the protocol's and the work's
// requests, their price per epoch and per day at one epoch a minute, and
// the coordination latency per epoch.
func CostTable(files, rounds int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| W | P | protocol PUT | protocol GET | work PUT+LIST | work GET | $ / epoch | $ / day (1 epoch/min) | added latency |\n")
	fmt.Fprintf(&b, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range []int{1, 8, 64, 256} {
		s := Shape{Workers: w, Parallelism: max(8, w), Files: files, Rounds: rounds}
		p, k := Protocol(s), Work(s)
		total := p.Add(k).Dollars()
		fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %d | $%.5f | $%.2f | %s |\n",
			w, s.Parallelism, p.Puts, p.Gets, k.Puts+k.Lists, k.Gets, total, total*24*60,
			DefaultLatency.EpochLatency(s).Round(10*time.Millisecond))
	}
	return b.String()
}
