package kafkatest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// internal/faultproxy is an HTTP proxy (S3 requests); a Kafka client
// speaks its own protocol over TCP and learns the brokers' addresses from
// the metadata, so a proxy on another port would be bypassed after the
// first request. The faults here sit in the broker's own listener
// instead (kfake.ListenFn): the address the broker advertises is the
// faulty one. The listener reads the Kafka request frames (size, api key,
// version, correlation id, client id) and, at random with a seed, for the
// requests of one client id (floe's, "floe": the tests' producer, "kgo",
// is left alone so that what was produced is known), resets the
// connection before the broker sees the request, lets the broker answer
// and loses the response, tears the response in the middle, or delays it.

// FaultKind is one fault of the faulty listener.
type FaultKind int

const (
	// FaultReset closes the connection (RST) before the request reaches
	// the broker.
	FaultReset FaultKind = iota
	// FaultLostResponse lets the broker handle the request and closes the
	// connection instead of sending the response.
	FaultLostResponse
	// FaultTear sends half of the response and closes the connection.
	FaultTear
	// FaultSlow delays the response by 50 to 400 ms.
	FaultSlow
)

// AllFaults are every fault kind.
var AllFaults = []FaultKind{FaultReset, FaultLostResponse, FaultTear, FaultSlow}

func (k FaultKind) String() string {
	switch k {
	case FaultReset:
		return "reset"
	case FaultLostResponse:
		return "lost-response"
	case FaultTear:
		return "tear"
	case FaultSlow:
		return "slow"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// Faults drives the faulty listener of a StartFaulty broker.
type Faults struct {
	mu       sync.Mutex
	p        float64
	rng      *rand.Rand
	kinds    []FaultKind
	clientID string
	requests map[string]int // requests of clientID, by api key name
	faults   map[FaultKind]int
}

// Set makes a fraction p of clientID's requests fail with one of kinds,
// drawn from a generator seeded with seed; p = 0 turns the faults off.
func (f *Faults) Set(p float64, seed uint64, clientID string, kinds ...FaultKind) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(kinds) == 0 {
		kinds = AllFaults
	}
	f.p, f.rng, f.kinds, f.clientID = p, rand.New(rand.NewPCG(seed, 0x66617573)), kinds, clientID
}

// Off turns the faults off.
func (f *Faults) Off() { f.Set(0, 0, "") }

// Counts returns the faults injected so far, by kind.
func (f *Faults) Counts() map[FaultKind]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[FaultKind]int, len(f.faults))
	for k, n := range f.faults {
		out[k] = n
	}
	return out
}

// Summary describes the requests seen and the faults injected.
func (f *Faults) Summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var req, fl []string
	total := 0
	for k, n := range f.requests {
		req = append(req, fmt.Sprintf("%s=%d", k, n))
		total += n
	}
	for k, n := range f.faults {
		fl = append(fl, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(req)
	sort.Strings(fl)
	return fmt.Sprintf("%d requests (%s), faults: %s", total, strings.Join(req, " "), strings.Join(fl, " "))
}

// decide draws the fault of one request (ok false: none).
func (f *Faults) decide(apiKey int16, clientID string) (FaultKind, time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.p <= 0 || clientID != f.clientID {
		return 0, 0, false
	}
	if f.requests == nil {
		f.requests, f.faults = map[string]int{}, map[FaultKind]int{}
	}
	f.requests[apiName(apiKey)]++
	if f.rng.Float64() >= f.p {
		return 0, 0, false
	}
	k := f.kinds[f.rng.IntN(len(f.kinds))]
	f.faults[k]++
	return k, time.Duration(50+f.rng.IntN(350)) * time.Millisecond, true
}

func apiName(k int16) string {
	switch k {
	case 0:
		return "produce"
	case 1:
		return "fetch"
	case 2:
		return "list_offsets"
	case 3:
		return "metadata"
	case 18:
		return "api_versions"
	case 71:
		return "get_telemetry_subscriptions"
	case 72:
		return "push_telemetry"
	}
	return fmt.Sprintf("api%d", k)
}

// StartFaulty starts a kfake broker whose listener injects the faults
// set on the returned Faults (none until Set). With EnvBrokers set the
// test is skipped: the faults need the broker's listener.
func StartFaulty(t testing.TB) (*Broker, *Faults) {
	t.Helper()
	if os.Getenv(EnvBrokers) != "" {
		t.Skip("the faulty listener needs kfake; " + EnvBrokers + " names a real cluster")
	}
	f := &Faults{}
	listen := func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		if err != nil {
			return nil, err
		}
		return &faultListener{Listener: ln, f: f}, nil
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ListenFn(listen))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	b := &Broker{t: t, fake: c, brokers: c.ListenAddrs()}
	b.connect()
	t.Cleanup(b.Close)
	return b, f
}

type faultListener struct {
	net.Listener
	f *Faults
}

func (l *faultListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &faultConn{Conn: c, f: l.f, pending: map[int32]planned{}}, nil
}

// planned is the fault of a request, applied to its response.
type planned struct {
	kind  FaultKind
	delay time.Duration
}

// faultConn is the broker's side of a client connection: Read hands the
// broker whole request frames, Write sends its response frames.
type faultConn struct {
	net.Conn
	f *Faults

	rbuf []byte // the rest of a request frame the broker is reading

	mu      sync.Mutex
	pending map[int32]planned // by correlation id
	wbuf    []byte            // response bytes not yet a whole frame
}

var errInjected = errors.New("kafkatest: injected fault")

func (c *faultConn) Read(p []byte) (int, error) {
	if len(c.rbuf) == 0 {
		var size [4]byte
		if _, err := io.ReadFull(c.Conn, size[:]); err != nil {
			return 0, err
		}
		n := binary.BigEndian.Uint32(size[:])
		if n > 100<<20 {
			return 0, fmt.Errorf("kafkatest: request frame of %d bytes", n)
		}
		frame := make([]byte, 4+n)
		copy(frame, size[:])
		if _, err := io.ReadFull(c.Conn, frame[4:]); err != nil {
			return 0, err
		}
		if key, corr, id, ok := requestHeader(frame[4:]); ok {
			if k, d, ok := c.f.decide(key, id); ok {
				if k == FaultReset {
					c.reset()
					return 0, errInjected
				}
				c.mu.Lock()
				c.pending[corr] = planned{k, d}
				c.mu.Unlock()
			}
		}
		c.rbuf = frame
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

// requestHeader parses api key, correlation id and client id of a request
// (header v1 and v2 start alike).
func requestHeader(b []byte) (apiKey int16, corr int32, clientID string, ok bool) {
	if len(b) < 10 {
		return 0, 0, "", false
	}
	apiKey = int16(binary.BigEndian.Uint16(b[0:2]))
	corr = int32(binary.BigEndian.Uint32(b[4:8]))
	n := int16(binary.BigEndian.Uint16(b[8:10]))
	if n > 0 && len(b) >= 10+int(n) {
		clientID = string(b[10 : 10+int(n)])
	}
	return apiKey, corr, clientID, true
}

func (c *faultConn) reset() {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Conn.Close()
}

func (c *faultConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wbuf = append(c.wbuf, p...)
	for len(c.wbuf) >= 8 {
		n := int(binary.BigEndian.Uint32(c.wbuf[:4]))
		if len(c.wbuf) < 4+n {
			break
		}
		frame := c.wbuf[:4+n]
		corr := int32(binary.BigEndian.Uint32(frame[4:8]))
		pl, faulty := c.pending[corr]
		delete(c.pending, corr)
		switch {
		case !faulty:
		case pl.kind == FaultLostResponse:
			c.reset()
			return 0, errInjected
		case pl.kind == FaultTear:
			_, _ = c.Conn.Write(frame[:len(frame)/2])
			c.reset()
			return 0, errInjected
		case pl.kind == FaultSlow:
			time.Sleep(pl.delay)
		}
		if _, err := c.Conn.Write(frame); err != nil {
			return 0, err
		}
		c.wbuf = c.wbuf[4+n:]
	}
	if len(c.wbuf) == 0 {
		c.wbuf = nil
	}
	return len(p), nil
}
