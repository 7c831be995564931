// Package faultproxy is a fault-injecting HTTP reverse proxy for tests: it
// listens on 127.0.0.1 in front of a loopback S3 server (internal/s3test's
// versitygw) and, by rule or at random with a seed, answers 503 SlowDown or
// 500 InternalError, resets the connection, forwards a request and then
// loses its response, stalls a request unanswered until released, or tears
// a response body in the middle.
//
// It forwards requests unchanged (the Host header included, so AWS SigV4
// signatures made for the proxy's address still verify) and counts every
// request it receives by method, so tests can also check how many requests
// an operation costs.
//
//	p, err := faultproxy.Start(srv.Endpoint)
//	defer p.Close()
//	p.SetRandom(faultproxy.Random{P: 0.2, Seed: 1, Kinds: faultproxy.AllKinds})
//	url := strings.Replace(bucketURL, srv.Endpoint, p.URL, 1)
//
// Only loopback addresses are accepted, for the proxy and its target.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// Kind is a fault.
type Kind int

const (
	// Pass forwards the request and its response unchanged.
	Pass Kind = iota
	// SlowDown answers 503 with S3's SlowDown error, without forwarding.
	SlowDown
	// InternalError answers 500 with S3's InternalError, without forwarding.
	InternalError
	// Reset resets the connection (TCP RST) without forwarding.
	Reset
	// LostResponse forwards the request (it applies), reads the whole
	// response, then resets the connection instead of answering.
	LostResponse
	// Stall holds the request unanswered, without forwarding it, until
	// Release is called (then it is forwarded normally), the client gives up,
	// or the proxy is closed.
	Stall
	// Tear forwards the request, then sends the response headers and half
	// of the body and cuts the connection. A response without a body of at
	// least 2 bytes is lost instead (as LostResponse).
	Tear
	// StallBody forwards the request, sends the response headers and half
	// of the body, then holds the rest until Release, the client gives up
	// or the proxy is closed (then the connection is cut). A response
	// without a body of at least 2 bytes is held whole.
	StallBody
	// Drip forwards the request and sends the response body in 10 pieces
	// with Rule.Delay (default 50ms) between them: slow, but progressing.
	Drip
)

// AllKinds lists every fault.
var AllKinds = []Kind{SlowDown, InternalError, Reset, LostResponse, Stall, Tear, StallBody, Drip}

// Unapplied lists the faults that never forward the request: after them the
// request has certainly not applied.
var Unapplied = []Kind{SlowDown, InternalError, Reset, Stall}

func (k Kind) String() string {
	switch k {
	case Pass:
		return "pass"
	case SlowDown:
		return "slowdown"
	case InternalError:
		return "internal-error"
	case Reset:
		return "reset"
	case LostResponse:
		return "lost-response"
	case Stall:
		return "stall"
	case Tear:
		return "tear"
	case StallBody:
		return "stall-body"
	case Drip:
		return "drip"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Match selects requests. A nil Match selects every request.
type Match func(r *http.Request) bool

// Method selects requests by HTTP method.
func Method(m string) Match { return func(r *http.Request) bool { return r.Method == m } }

// PathContains selects requests whose URL path contains s.
func PathContains(s string) Match {
	return func(r *http.Request) bool { return strings.Contains(r.URL.Path, s) }
}

// Conditional selects conditional writes (If-Match or If-None-Match).
func Conditional(r *http.Request) bool {
	return r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != ""
}

// Not inverts m.
func Not(m Match) Match { return func(r *http.Request) bool { return m == nil || !m(r) } }

// And selects requests every m selects.
func And(ms ...Match) Match {
	return func(r *http.Request) bool {
		for _, m := range ms {
			if m != nil && !m(r) {
				return false
			}
		}
		return true
	}
}

// Rule injects Kind into requests that Match selects: it lets the first Skip
// of them pass, then faults the next Times (0: every later one).
type Rule struct {
	Match Match
	Kind  Kind
	Skip  int
	Times int
	// Delay is the pause between the pieces of a Drip (default 50ms).
	Delay time.Duration
}

// Random injects, into each request Match selects that no rule faulted, a
// fault drawn uniformly from Kinds with probability P, from a math/rand/v2
// PCG source seeded with Seed.
type Random struct {
	P     float64
	Kinds []Kind
	Seed  uint64
	Match Match
	// Ambiguous selects the requests that may get LostResponse or Tear,
	// the faults that apply a request and hide its outcome. Nil: every
	// request except conditional writes (If-Match, If-None-Match), whose
	// outcome the caller would then have to resolve by reading back. A
	// draw of one of them for another request becomes SlowDown.
	Ambiguous Match
}

type ruleState struct {
	Rule
	seen int
}

// Proxy is a running fault proxy.
type Proxy struct {
	// URL is the proxy's base URL, http://127.0.0.1:port.
	URL    string
	target *url.URL
	srv    *http.Server
	ln     net.Listener
	fwd    *http.Transport

	mu       sync.Mutex
	rules    []*ruleState
	random   Random
	rng      *rand.Rand
	stallAll bool
	release  chan struct{} // closed by Release
	closed   chan struct{}
	counts   map[string]int // by method
	reqs     []Request
	faults   map[Kind]int
	log      []string
	stalled  int // requests held now
	closeErr sync.Once
}

// Start starts a proxy on a free 127.0.0.1 port in front of target (a
// loopback base URL such as http://127.0.0.1:40123).
func Start(target string) (*Proxy, error) {
	tu, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: target: %w", err)
	}
	if tu.Scheme != "http" || !isLoopback(tu.Hostname()) {
		return nil, fmt.Errorf("%w: target %q (want http://127.0.0.1:port)", ErrNotLoopback, target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{
		URL:     "http://" + ln.Addr().String(),
		target:  tu,
		ln:      ln,
		fwd:     &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 32, IdleConnTimeout: 30 * time.Second, DisableCompression: true},
		release: make(chan struct{}),
		closed:  make(chan struct{}),
		counts:  map[string]int{},
		faults:  map[Kind]int{},
		rng:     rand.New(rand.NewPCG(0, 0)),
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Close stops the proxy: held requests are dropped, connections closed.
func (p *Proxy) Close() {
	p.closeErr.Do(func() {
		close(p.closed)
		_ = p.srv.Close()
		p.fwd.CloseIdleConnections()
	})
}

// SetRules replaces the rules. Rules are checked in order; the first that
// faults a request wins.
func (p *Proxy) SetRules(rules ...Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = p.rules[:0]
	for _, r := range rules {
		p.rules = append(p.rules, &ruleState{Rule: r})
	}
}

// SetRandom sets the random faults (P = 0: none) and reseeds the source.
func (p *Proxy) SetRandom(r Random) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.random = r
	p.rng = rand.New(rand.NewPCG(r.Seed, r.Seed^0x6a09e667f3bcc909))
}

// StallAll makes every later request stall (as Kind Stall) until Release.
func (p *Proxy) StallAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stallAll = true
}

// Release ends StallAll and lets every held request through (forwarded
// normally).
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stallAll = false
	close(p.release)
	p.release = make(chan struct{})
}

// Stalled returns how many requests are held now.
func (p *Proxy) Stalled() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stalled
}

// Counts returns how many requests were received, by HTTP method.
func (p *Proxy) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// Request is one request the proxy received (faulted or not).
type Request struct {
	Method, Path, RawQuery string
}

// Requests returns every request received, in order, since the start or
// ResetCounts: tests classify them (S3 operation kinds) to compare with
// what a client says it sent.
func (p *Proxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.reqs...)
}

// Faults returns how many faults of each kind were injected.
func (p *Proxy) Faults() map[Kind]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Kind]int, len(p.faults))
	for k, v := range p.faults {
		out[k] = v
	}
	return out
}

// Log returns one line per request: "<n> <METHOD> <path> <fault>".
func (p *Proxy) Log() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

// ResetCounts clears the counters and the log.
func (p *Proxy) ResetCounts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts = map[string]int{}
	p.faults = map[Kind]int{}
	p.log = nil
	p.reqs = nil
}

// FaultSummary formats Faults for a test log, e.g. "reset=3 slowdown=5".
func (p *Proxy) FaultSummary() string {
	f := p.Faults()
	var parts []string
	for k, n := range f {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// decide picks the fault for r and records the request.
func (p *Proxy) decide(r *http.Request) (Kind, time.Duration, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[r.Method]++
	p.reqs = append(p.reqs, Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery})
	kind, delay := Pass, time.Duration(0)
	if p.stallAll {
		kind = Stall
	}
	for _, rs := range p.rules {
		if kind != Pass {
			break
		}
		if rs.Match != nil && !rs.Match(r) {
			continue
		}
		n := rs.seen
		rs.seen++
		if n >= rs.Skip && (rs.Times == 0 || n < rs.Skip+rs.Times) {
			kind, delay = rs.Kind, rs.Delay
		}
	}
	if rd := p.random; kind == Pass && rd.P > 0 && len(rd.Kinds) > 0 && (rd.Match == nil || rd.Match(r)) {
		if p.rng.Float64() < rd.P {
			kind = rd.Kinds[p.rng.IntN(len(rd.Kinds))]
			if kind == LostResponse || kind == Tear || kind == StallBody {
				amb := rd.Ambiguous
				if amb == nil {
					amb = Not(Conditional)
				}
				if !amb(r) {
					kind = SlowDown
				}
			}
		}
	}
	if kind != Pass {
		p.faults[kind]++
	}
	p.log = append(p.log, fmt.Sprintf("%d %s %s %s", len(p.log), r.Method, r.URL.Path, kind))
	if delay <= 0 {
		delay = 50 * time.Millisecond
	}
	return kind, delay, p.release
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	kind, delay, release := p.decide(r)
	switch kind {
	case SlowDown:
		s3Error(w, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
		return
	case InternalError:
		s3Error(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
		return
	case Reset:
		resetConn(w)
		return
	case Stall:
		if !p.hold(r, release) {
			resetConn(w)
			return
		}
	}
	resp, err := p.forward(r)
	if err != nil {
		s3Error(w, http.StatusBadGateway, "InternalError", "faultproxy: "+err.Error())
		return
	}
	defer resp.Body.Close()
	switch kind {
	case LostResponse:
		_, _ = io.Copy(io.Discard, resp.Body)
		resetConn(w)
		return
	case Tear:
		body, err := io.ReadAll(resp.Body)
		if err != nil || len(body) < 2 {
			resetConn(w)
			return
		}
		copyHeader(w.Header(), resp.Header)
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body[:len(body)/2])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		closeConn(w)
		return
	case StallBody, Drip:
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			resetConn(w)
			return
		}
		copyHeader(w.Header(), resp.Header)
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(resp.StatusCode)
		flush := func() {
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		if kind == StallBody {
			_, _ = w.Write(body[:len(body)/2])
			flush()
			if !p.hold(r, release) {
				closeConn(w)
				return
			}
			_, _ = w.Write(body[len(body)/2:])
			return
		}
		for i := range 10 {
			_, _ = w.Write(body[i*len(body)/10 : (i+1)*len(body)/10])
			flush()
			if i < 9 {
				select {
				case <-time.After(delay):
				case <-r.Context().Done():
					return
				case <-p.closed:
					closeConn(w)
					return
				}
			}
		}
		return
	}
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// hold blocks a request until release is closed (true), or the client gives
// up or the proxy closes (false).
func (p *Proxy) hold(r *http.Request, release <-chan struct{}) bool {
	p.mu.Lock()
	p.stalled++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.stalled--
		p.mu.Unlock()
	}()
	select {
	case <-release:
		return true
	case <-r.Context().Done():
	case <-p.closed:
	}
	return false
}

// hopHeaders are not forwarded.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
}

func (p *Proxy) forward(r *http.Request) (*http.Response, error) {
	u := *p.target
	u.Path = r.URL.Path
	u.RawPath = r.URL.RawPath
	u.RawQuery = r.URL.RawQuery
	body := r.Body
	if r.ContentLength == 0 {
		body = http.NoBody
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), body)
	if err != nil {
		return nil, err
	}
	out.Header = make(http.Header, len(r.Header))
	copyHeader(out.Header, r.Header)
	out.Host = r.Host // the client signed the proxy's host
	out.ContentLength = r.ContentLength
	resp, err := p.fwd.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n<Error><Code>%s</Code><Message>%s</Message><RequestId>faultproxy</RequestId></Error>", code, msg)
}

// resetConn resets the client's connection (TCP RST): no response at all.
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// closeConn closes the client's connection after what was written so far.
func closeConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = buf.Flush()
	_ = conn.Close()
}

// ErrNotLoopback is returned for a non-loopback address.
var ErrNotLoopback = errors.New("faultproxy: only loopback addresses are allowed")
