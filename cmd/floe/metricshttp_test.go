package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"
)

// copiedSampleSpec is sampleSpec over a copy of the sample events, so a
// test can add input.
func copiedSampleSpec(t *testing.T) (spec, events string) {
	t.Helper()
	spec, dir := sampleSpec(t)
	events = filepath.Join(dir, "events")
	if err := os.MkdirAll(events, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("../../testdata/events")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("../../testdata/events", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(events, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	abs, _ := filepath.Abs("../../testdata/events")
	s := strings.Replace(mustRead(t, spec), `"`+abs+`"`, `"`+events+`"`, 1)
	if !strings.Contains(s, events) {
		t.Fatalf("spec does not name the events folder:\n%s", s)
	}
	if err := os.WriteFile(spec, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec, events
}

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// scrape GETs url as Prometheus does and parses the answer with the
// reference text parser.
func scrape(url string) (map[string]*dto.MetricFamily, error) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s: %s\n%s", url, resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		return nil, fmt.Errorf("content type %q", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("does not parse: %v\n%s", err, body)
	}
	return fams, nil
}

// gauge returns the value of the single series of name (-1: absent).
func gauge(fams map[string]*dto.MetricFamily, name string) float64 {
	f := fams[name]
	if f == nil || len(f.Metric) == 0 {
		return -1
	}
	m := f.Metric[0]
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// syncBuffer is a bytes.Buffer safe for a process's output copier and the
// test reading it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCLIMetricsAddr: a `floe run --trigger` worker serves its metrics over
// HTTP; a scrape parsed with the Prometheus text parser shows the head and
// counters after every epoch (an input file added while it runs shows up as
// the next epoch), and SIGTERM stops it cleanly (exit 0).
func TestCLIMetricsAddr(t *testing.T) {
	spec, events := copiedSampleSpec(t)
	addr := freeAddr(t)
	url := "http://" + addr + "/metrics"
	cmd := floeCommand(t, "run", spec, "--trigger", "100ms", "--metrics-addr", addr, "--log-format", "json")
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	waitScrape := func(what string, ok func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
		t.Helper()
		var last error
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			select {
			case err := <-exited:
				t.Fatalf("floe exited while waiting for %s: %v\n%s", what, err, stderr.String())
			default:
			}
			fams, err := scrape(url)
			if err != nil {
				last = err
				continue
			}
			if ok(fams) {
				return fams
			}
		}
		t.Fatalf("no scrape showed %s within 20s (last error %v)\nstderr:\n%s", what, last, stderr.String())
		return nil
	}
	fams := waitScrape("epoch 3", func(f map[string]*dto.MetricFamily) bool {
		return gauge(f, "floe_head_epoch") == 3 && gauge(f, "floe_pending_files") == 0
	})
	for name, want := range map[string]float64{
		"floe_run_epochs_committed_total": 3, "floe_rows_late_total": 4, "floe_rows_rejected_total": 12,
		"floe_run_restarts_total": 0, "floe_run_consecutive_failures": 0, "floe_run_exit_code": -1,
	} {
		if got := gauge(fams, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := metricValue(t, fams, "floe_rows_in_total", "pipeline", "clicks-per-user"); got == 0 {
		t.Errorf("floe_rows_in_total = 0")
	}
	rowsIn := gauge(fams, "floe_rows_in_total")

	// One more file: the next epoch shows up in the next scrapes.
	line := `{"event_time":"2024-01-01T00:20:00Z","user_id":"u1","page":"/","bytes":7}` + "\n"
	if err := os.WriteFile(filepath.Join(events, "events-00006.jsonl"), []byte(line+line), 0o644); err != nil {
		t.Fatal(err)
	}
	fams = waitScrape("epoch 4", func(f map[string]*dto.MetricFamily) bool { return gauge(f, "floe_head_epoch") == 4 })
	if got := gauge(fams, "floe_rows_in_total"); got != rowsIn+2 {
		t.Errorf("after one more file of 2 rows: floe_rows_in_total = %v, want %v", got, rowsIn+2)
	}
	if got := gauge(fams, "floe_run_epochs_committed_total"); got != 4 {
		t.Errorf("floe_run_epochs_committed_total = %v, want 4", got)
	}
	if !strings.Contains(stderr.String(), `"msg":"metrics: serving Prometheus metrics","url":"`+url+`"`) {
		t.Errorf("no log line names the metrics URL:\n%s", stderr.String())
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no exit within 20s of SIGTERM")
	}
	if !strings.Contains(stdout.String(), "committed epochs 1..4") {
		t.Errorf("stdout: %s", stdout.String())
	}
	if _, err := scrape(url); err == nil {
		t.Errorf("the metrics endpoint still answers after the worker exited")
	}
}

// TestCLIMetricsPush: `floe run --once --metrics-push URL` PUTs the run's
// metrics, exit code included, to the Pushgateway's grouping key of the
// pipeline when it ends; a gateway that refuses the push is logged and
// leaves the exit code alone.
func TestCLIMetricsPush(t *testing.T) {
	spec, _ := sampleSpec(t)
	type push struct {
		method, path, user string
		fams               map[string]*dto.MetricFamily
		err                error
	}
	var (
		mu     sync.Mutex
		pushes []push
		status = http.StatusOK
	)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := push{method: r.Method, path: r.URL.Path, fams: map[string]*dto.MetricFamily{}}
		p.user, _, _ = r.BasicAuth()
		dec := expfmt.NewDecoder(r.Body, expfmt.ResponseFormat(r.Header))
		for {
			var mf dto.MetricFamily
			if err := dec.Decode(&mf); err != nil {
				if err != io.EOF {
					p.err = err
				}
				break
			}
			p.fams[mf.GetName()] = &mf
		}
		mu.Lock()
		pushes = append(pushes, p)
		code := status
		mu.Unlock()
		w.WriteHeader(code)
	}))
	defer gw.Close()
	if !strings.HasPrefix(gw.URL, "http://127.0.0.1:") {
		t.Fatalf("test gateway not on loopback: %s", gw.URL)
	}

	gwURL := strings.Replace(gw.URL, "http://", "http://ops:secret@", 1)
	code, out, errOut := floe("run", spec, "--once", "--metrics-push", gwURL)
	if code != 0 {
		t.Fatalf("run: code %d\n%s%s", code, out, errOut)
	}
	if len(pushes) != 1 {
		t.Fatalf("%d pushes, want 1", len(pushes))
	}
	p := pushes[0]
	if p.method != http.MethodPut || p.path != "/metrics/job/floe/instance/clicks-per-user" || p.user != "ops" || p.err != nil {
		t.Fatalf("push: %s %s user %q, decode error %v", p.method, p.path, p.user, p.err)
	}
	for name, want := range map[string]float64{"floe_head_epoch": 3, "floe_run_epochs_committed_total": 3, "floe_run_exit_code": 0, "floe_rows_rejected_total": 12} {
		if got := gauge(p.fams, name); got != want {
			t.Errorf("pushed %s = %v, want %v", name, got, want)
		}
	}
	if gauge(p.fams, "floe_run_end_timestamp_seconds") <= 0 {
		t.Errorf("pushed metrics lack floe_run_end_timestamp_seconds")
	}

	// A gateway that answers 500: a warning, exit code unchanged.
	mu.Lock()
	status = http.StatusInternalServerError
	mu.Unlock()
	code, out, errOut = floe("run", spec, "--once", "--metrics-push", gwURL)
	if code != 0 || !strings.Contains(errOut, "the push to the Pushgateway failed") || strings.Contains(errOut, "secret") {
		t.Fatalf("push refused: code %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if len(pushes) != 2 || gauge(pushes[1].fams, "floe_run_epochs_committed_total") != 0 {
		t.Fatalf("second push: %d pushes", len(pushes))
	}
}

// TestCLIMetricsPushSecrets: the credentials of a --metrics-push URL (user
// info, token and password parameters, any other query value) appear in no
// log line or error, whether the gateway answers 500 (echoing the request
// in its body, as a proxy may), cannot be reached, or the URL is refused;
// and the grouping path is appended to the URL's path with the query kept
// as the query.
func TestCLIMetricsPushSecrets(t *testing.T) {
	spec, _ := sampleSpec(t)
	var (
		mu    sync.Mutex
		paths []string
		qs    []string
	)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		qs = append(qs, r.URL.RawQuery)
		mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "refused %s %s", r.Method, r.URL.RequestURI()) // echoes the secrets
	}))
	defer gw.Close()
	const query = "token=tok-secret-1&password=pw-secret-2&x=plain-secret-3"
	gwURL := strings.Replace(gw.URL, "http://", "http://ops:user-secret-0@", 1) + "/gw/?" + query
	code, out, errOut := floe("run", spec, "--once", "--metrics-push", gwURL)
	if code != 0 || !strings.Contains(errOut, "the push to the Pushgateway failed") || !strings.Contains(errOut, "status code 500") {
		t.Fatalf("push refused: code %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if strings.Contains(errOut+out, "secret") {
		t.Fatalf("a secret of the push URL is printed:\n%s%s", out, errOut)
	}
	if len(paths) != 1 || paths[0] != "/gw/metrics/job/floe/instance/clicks-per-user" || qs[0] != query {
		t.Fatalf("push went to path %q query %q, want /gw/metrics/job/floe/instance/clicks-per-user?%s", paths, qs, query)
	}
	t.Logf("warning: %s", lastLines(errOut, 1)[0])

	// Nothing listens: the transport error names the URL, redacted.
	dead := "http://" + freeAddr(t) + "/?token=tok-secret-4&foo=plain-secret-5"
	code, out, errOut = floe("run", spec, "--once", "--metrics-push", dead)
	if code != 0 || !strings.Contains(errOut, "the push to the Pushgateway failed") || strings.Contains(errOut+out, "secret") {
		t.Fatalf("unreachable gateway: code %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	// A URL that is not http(s): refused before the run, redacted.
	code, out, errOut = floe("run", spec, "--once", "--metrics-push", "ftp://ops:user-secret-6@host/?token=tok-secret-7")
	if code != 2 || !strings.HasPrefix(errOut, "floe: --metrics-push ftp://host/?token=REDACTED: want an http:// or https:// URL") ||
		strings.Contains(errOut+out, "secret") {
		t.Fatalf("ftp gateway: code %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}
