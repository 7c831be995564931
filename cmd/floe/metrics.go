package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/push"

	"github.com/floe-dev/floe/engine"
	"github.com/floe-dev/floe/spec"
)

// runMetrics holds a run's Prometheus metrics (one collector) and publishes
// them three ways, any of which may be used together:
//
//   - a file in the Prometheus text format (--metrics-file, for
//     node_exporter's textfile collector): written at the start, after every
//     committed epoch, after every failed attempt of a --trigger worker and
//     when the run ends, each time atomically (a
//     temporary file renamed over the old one), so a scrape never reads half
//     a file;
//   - an HTTP endpoint (--metrics-addr): promhttp serving the same registry
//     at /metrics while the run lasts, the head figures refreshed after every
//     epoch;
//   - a push to a Pushgateway when the run ends (--metrics-push).
//
// Pipeline counters (rows, files, ...) are the committed head's cumulative
// counters, so they only grow across runs; request counters are this
// process's. After each epoch the head is read back (a few small GETs of
// the state, in the background: the run does not wait for them).
type runMetrics struct {
	path string // "" : no file
	p    *spec.Pipeline
	log  *slog.Logger
	reg  *prometheus.Registry
	d    metricDescs
	read func(context.Context) (*engine.Status, error)

	mu         sync.Mutex
	head       *engine.Status  // last head read back
	progress   engine.Progress // last progress of the run
	haveProg   bool
	epochs     int64               // committed by this run
	startEpoch int64               // the head's epoch when the run started (-1: not read)
	reqs       engine.RequestStats // this process's requests (epoch stats until the run's total is known)
	seen       map[int64]bool      // epochs whose stats were added to reqs
	started    time.Time           // this run
	ended      time.Time           // zero while running
	exitCode   int
	restarts   int64 // restarts after failed attempts (--trigger self-healing)
	failures   int64 // consecutive failed attempts now (0 after a commit)

	kick chan struct{}
	done chan struct{}
	srv  *http.Server // --metrics-addr
}

// newRunMetrics returns the metrics of a run of p; path, when not "", is
// the textfile to keep up to date.
func newRunMetrics(path string, p *spec.Pipeline, log *slog.Logger) *runMetrics {
	m := &runMetrics{path: path, p: p, log: log, reg: prometheus.NewRegistry(), started: time.Now(),
		d: newMetricDescs(p.Name), seen: map[int64]bool{}, startEpoch: -1, kick: make(chan struct{}, 1), done: make(chan struct{})}
	m.read = func(ctx context.Context) (*engine.Status, error) {
		return engine.ReadStatusWith(ctx, p, engine.StatusOptions{HeadOnly: true})
	}
	m.reg.MustRegister(m)
	return m
}

// start reads the head and writes the file once, then keeps it up to date
// in the background until finish.
func (m *runMetrics) start(ctx context.Context) {
	m.refresh(ctx)
	go func() {
		defer close(m.done)
		for range m.kick {
			m.refresh(ctx)
		}
	}()
}

// observe records a progress snapshot; a new epoch schedules a refresh.
func (m *runMetrics) observe(pr engine.Progress) {
	m.mu.Lock()
	newEpoch := !m.haveProg || pr.Epoch != m.progress.Epoch
	if m.haveProg && newEpoch {
		m.failures = 0 // an epoch committed: the failures before it are over
	}
	if m.startEpoch >= 0 {
		m.epochs = pr.Epoch - m.startEpoch // epoch numbers are consecutive across generations
	}
	m.progress, m.haveProg = pr, true
	m.mu.Unlock()
	if newEpoch {
		select {
		case m.kick <- struct{}{}:
		default: // a refresh is already due; it will see this epoch
		}
	}
}

// finish records how the run ended and writes the file a last time.
func (m *runMetrics) finish(ctx context.Context, res *engine.Result, code int) {
	close(m.kick)
	<-m.done
	m.mu.Lock()
	if res != nil {
		m.epochs = int64(res.Epochs)
		m.reqs = res.Requests
	}
	m.ended, m.exitCode = time.Now(), code
	m.mu.Unlock()
	m.refresh(ctx)
}

// refresh reads the head back and writes the file.
func (m *runMetrics) refresh(ctx context.Context) {
	st, err := m.read(ctx)
	if err != nil {
		m.log.Warn("metrics: reading the head failed; writing the figures known", "error", err)
	}
	m.mu.Lock()
	if m.startEpoch < 0 && st != nil && !m.haveProg {
		m.startEpoch = st.Epoch
	}
	if st != nil && st.Committed {
		m.head = st
		if e := st.LastEpoch; e != nil && m.ended.IsZero() && !m.seen[st.Epoch] && m.haveProg {
			m.seen[st.Epoch] = true
			m.reqs.Requests = m.reqs.Requests.Add(engine.Requests{Get: e.Gets, Put: e.Puts, List: e.Lists, Delete: e.Deletes})
			m.reqs.Retries += e.Retries
		}
	}
	m.mu.Unlock()
	m.writeFile()
}

// writeFile writes the metrics file (if any) with the figures known now.
// Writers do not need to be serialised: each writes its own temporary file
// and renames it over the file, and each collects the figures at that time.
func (m *runMetrics) writeFile() {
	if m.path == "" {
		return
	}
	if err := prometheus.WriteToTextfile(m.path, m.reg); err != nil {
		m.log.Warn("metrics: writing the metrics file failed", "file", m.path, "error", err)
	}
}

// serve listens on addr (host:port; ":9464" for every interface) and
// serves the metrics at /metrics until stop. The listener is opened before
// serve returns, so a taken port fails the run at once.
func (m *runMetrics) serve(addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelWarn)}))
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "floe: pipeline %s; metrics at /metrics\n", m.p.Name)
	})
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Warn("metrics: the HTTP endpoint stopped", "error", err)
		}
	}()
	return ln.Addr(), nil
}

// stopServing closes the HTTP endpoint (after the final figures were
// recorded: a scrape in flight still gets them).
func (m *runMetrics) stopServing() {
	if m.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
}

// pushTimeout bounds a push to the Pushgateway.
const pushTimeout = 30 * time.Second

// push replaces the metrics of this pipeline on the Pushgateway at gateway
// (HTTP PUT to <gateway>/metrics/job/floe/instance/<pipeline>): job "floe",
// the pipeline name as the instance label of the grouping key, so the
// pipelines of one gateway do not overwrite each other. The grouping path is
// appended to the URL's own path (a gateway behind a path prefix) and its
// query is kept as the query (a proxy's ?token=...). User info in the URL
// becomes basic auth. No error or log line shows the password, the user or
// any query value (pushURLForLog), whatever the gateway answers.
func (m *runMetrics) push(ctx context.Context, gateway string) error {
	shown := pushURLForLog(gateway)
	u, err := parsePushURL(gateway)
	if err != nil {
		return err
	}
	user := u.User
	u.User, u.Fragment, u.RawFragment = nil, "", ""
	if !strings.HasPrefix(u.Path, "/") {
		u.Path, u.RawPath = "/"+u.Path, "" // http://host:9091: the path is "/" in a request
	}
	target := u.JoinPath("metrics", "job", "floe", "instance", m.p.Name)
	base := *u
	base.RawQuery, base.ForceQuery = "", false
	// The library builds its own URL by appending to the string it is
	// given; the doer sends the request to target instead, so the query
	// stays a query. base (no query, no user) is all its messages can show.
	pu := push.New(base.String(), "floe").Grouping("instance", m.p.Name).Gatherer(m.reg).
		Client(&pushDoer{c: &http.Client{Timeout: pushTimeout}, target: target})
	if user != nil {
		pw, _ := user.Password()
		pu = pu.BasicAuth(user.Username(), pw)
	}
	ctx, cancel := context.WithTimeout(ctx, pushTimeout)
	defer cancel()
	if err := pu.PushContext(ctx); err != nil {
		return fmt.Errorf("pushing metrics to %s: %s", shown, scrubSecrets(err.Error(), gateway))
	}
	return nil
}

// parsePushURL parses a --metrics-push URL, refusing what is not the
// http:// or https:// URL of a Pushgateway (the error shows it redacted).
func parsePushURL(gateway string) (*url.URL, error) {
	u, err := url.Parse(gateway)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("--metrics-push %s: want an http:// or https:// URL of a Pushgateway", pushURLForLog(gateway))
	}
	return u, nil
}

// pushDoer sends the Pushgateway request to the URL floe built, and keeps
// the URL out of a transport error (an *url.Error names the whole URL).
type pushDoer struct {
	c      *http.Client
	target *url.URL
}

func (d *pushDoer) Do(req *http.Request) (*http.Response, error) {
	t := *d.target
	req.URL, req.Host = &t, t.Host
	resp, err := d.c.Do(req)
	var ue *url.Error
	if errors.As(err, &ue) {
		return nil, fmt.Errorf("%s %s: %w", ue.Op, pushURLForLog(ue.URL), ue.Err)
	}
	return resp, err
}

// pushURLForLog is the --metrics-push URL as messages show it: redacted as
// every URL floe prints (engine.Redact: no user info, secret-looking
// parameters hidden), and, since a Pushgateway needs no query of its own,
// every query value hidden too (a proxy's credential may have any name).
func pushURLForLog(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return engine.Redact(raw)
	}
	if u.RawQuery != "" {
		q, _ := url.ParseQuery(u.RawQuery)
		for k, vs := range q {
			for i := range vs {
				vs[i] = "REDACTED"
			}
			q[k] = vs
		}
		u.RawQuery = q.Encode()
	}
	return engine.Redact(u.String())
}

// scrubSecrets removes from msg (a text the gateway or a proxy may have
// filled, e.g. a 500 body echoing the request) every secret of the
// --metrics-push URL raw: the user info, the password, the query and each query
// value, raw and unescaped. Values shorter than 3 characters are left
// alone (they would match ordinary words).
func scrubSecrets(msg, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return engine.Redact(msg)
	}
	var secrets []string
	if u.User != nil {
		secrets = append(secrets, u.User.String())
		if pw, ok := u.User.Password(); ok {
			secrets = append(secrets, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
	}
	if u.RawQuery != "" {
		secrets = append(secrets, u.RawQuery)
		q, _ := url.ParseQuery(u.RawQuery)
		for _, vs := range q {
			for _, v := range vs {
				secrets = append(secrets, v, url.QueryEscape(v), url.PathEscape(v))
			}
		}
	}
	// Longest first: a value inside the whole query is replaced with it.
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	for _, s := range secrets {
		if len(s) >= 3 {
			msg = strings.ReplaceAll(msg, s, "REDACTED")
		}
	}
	return msg
}

// failed records a failed attempt of a --trigger worker; failures is the
// number of consecutive failed attempts so far. The metrics file is written
// at once, without reading the head (the failure may be the store's: a
// read would wait for the retry budget), so the textfile collector shows
// floe_run_consecutive_failures during an outage, as a scrape of
// --metrics-addr does.
func (m *runMetrics) failed(failures int) {
	m.mu.Lock()
	m.failures = int64(failures)
	m.mu.Unlock()
	m.writeFile()
}

// restarted records a restart after a failed attempt (and writes the file).
func (m *runMetrics) restarted() {
	m.mu.Lock()
	m.restarts++
	m.mu.Unlock()
	m.writeFile()
}

// metricDescs are the metrics of a run.
type metricDescs struct {
	descHeadEpoch    *prometheus.Desc
	descHeadGen      *prometheus.Desc
	descFilesIn      *prometheus.Desc
	descRowsIn       *prometheus.Desc
	descRowsOut      *prometheus.Desc
	descRowsLate     *prometheus.Desc
	descRowsRejected *prometheus.Desc
	descRowsFiltered *prometheus.Desc
	descWindows      *prometheus.Desc
	descWatermark    *prometheus.Desc
	descLastCommit   *prometheus.Desc
	descStateBytes   *prometheus.Desc
	descEpochDur     *prometheus.Desc
	descEpochs       *prometheus.Desc
	descPending      *prometheus.Desc
	descRequests     *prometheus.Desc
	descRetries      *prometheus.Desc
	descRunStart     *prometheus.Desc
	descRunEnd       *prometheus.Desc
	descRunExit      *prometheus.Desc
	descRestarts     *prometheus.Desc
	descFailures     *prometheus.Desc
	descKafkaLag     *prometheus.Desc
}

func newMetricDescs(pipeline string) metricDescs {
	labels := prometheus.Labels{"pipeline": pipeline}
	d := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, variable, labels)
	}
	return metricDescs{
		descHeadEpoch:    d("floe_head_epoch", "Epoch of the committed head."),
		descHeadGen:      d("floe_head_generation", "Generation of the committed head."),
		descFilesIn:      d("floe_files_in_total", "Input files processed over the pipeline's life."),
		descRowsIn:       d("floe_rows_in_total", "Input rows over the pipeline's life (rejected included)."),
		descRowsOut:      d("floe_rows_out_total", "Rows written to the sink over the pipeline's life."),
		descRowsLate:     d("floe_rows_late_total", "Rows later than the allowed lateness over the pipeline's life."),
		descRowsRejected: d("floe_rows_rejected_total", "Input rows rejected over the pipeline's life."),
		descRowsFiltered: d("floe_rows_filtered_total", "Input rows dropped by filters over the pipeline's life."),
		descWindows:      d("floe_windows_emitted_total", "Windows emitted over the pipeline's life."),
		descWatermark:    d("floe_watermark_seconds", "Watermark of the committed head, Unix seconds (+Inf once drained)."),
		descLastCommit:   d("floe_last_commit_timestamp_seconds", "When the head epoch was committed, Unix seconds."),
		descStateBytes:   d("floe_state_bytes", "Bytes of operator state (bases and deltas) the head references."),
		descEpochDur:     d("floe_last_epoch_duration_seconds", "Wall time of the head epoch, before its commit."),
		descEpochs:       d("floe_run_epochs_committed_total", "Epochs committed by this run."),
		descPending:      d("floe_pending_files", "Files this run listed and has not processed yet (lag)."),
		descRequests:     d("floe_store_requests_total", "Object-store requests of this run, by kind, as the store bills them: every LIST page, multipart part, HEAD and retry (file:// and mem://: one per store call).", "kind"),
		descRetries:      d("floe_store_retries_total", "Object-store requests of this run that were retried."),
		descRunStart:     d("floe_run_start_timestamp_seconds", "When this run started, Unix seconds."),
		descRunEnd:       d("floe_run_end_timestamp_seconds", "When this run ended, Unix seconds (absent while it runs)."),
		descRunExit:      d("floe_run_exit_code", "Exit code of this run: 0 ok, 2 failed, 3 fenced (absent while it runs)."),
		descRestarts:     d("floe_run_restarts_total", "Restarts of this --trigger worker after a failed attempt (transient storage failures)."),
		descFailures:     d("floe_run_consecutive_failures", "Failed attempts since the last committed epoch (the worker gives up after --max-restarts)."),
		descKafkaLag:     d("floe_kafka_lag_records", "A kafka source's records between the committed offset and the partition's high watermark (as the head recorded it); source names the graph form's kafka source (empty in the linear form).", "source", "topic", "partition"),
	}
}

// Describe implements prometheus.Collector.
func (m *runMetrics) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(m, ch) }

// Collect implements prometheus.Collector.
func (m *runMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	emit := func(d *prometheus.Desc, t prometheus.ValueType, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, lv...)
	}
	if h := m.head; h != nil {
		emit(m.d.descHeadEpoch, prometheus.GaugeValue, float64(h.Epoch))
		emit(m.d.descHeadGen, prometheus.GaugeValue, float64(h.Generation))
		c := h.Counters
		emit(m.d.descFilesIn, prometheus.CounterValue, float64(c.FilesIn))
		emit(m.d.descRowsIn, prometheus.CounterValue, float64(c.RowsIn))
		emit(m.d.descRowsOut, prometheus.CounterValue, float64(c.RowsOut))
		emit(m.d.descRowsLate, prometheus.CounterValue, float64(c.RowsLate))
		emit(m.d.descRowsRejected, prometheus.CounterValue, float64(c.RowsRejected))
		emit(m.d.descRowsFiltered, prometheus.CounterValue, float64(c.RowsFiltered))
		emit(m.d.descWindows, prometheus.CounterValue, float64(c.Windows))
		if wm := h.WatermarkUS; wm != nil && *wm != math.MinInt64 {
			v := math.Inf(1)
			if *wm != math.MaxInt64 {
				v = float64(*wm) / 1e6
			}
			emit(m.d.descWatermark, prometheus.GaugeValue, v)
		}
		if h.LastCommit != nil {
			emit(m.d.descLastCommit, prometheus.GaugeValue, float64(h.LastCommit.UnixMilli())/1e3)
		}
		emit(m.d.descStateBytes, prometheus.GaugeValue, float64(h.StateBytes))
		if e := h.LastEpoch; e != nil {
			emit(m.d.descEpochDur, prometheus.GaugeValue, float64(e.DurationMs)/1e3)
		}
		for _, l := range h.KafkaPartitions {
			emit(m.d.descKafkaLag, prometheus.GaugeValue, float64(l.Lag), l.Source, l.Topic, strconv.Itoa(int(l.Partition)))
		}
	}
	emit(m.d.descEpochs, prometheus.CounterValue, float64(m.epochs))
	if m.haveProg {
		emit(m.d.descPending, prometheus.GaugeValue, float64(max(0, m.progress.FilesPending-m.progress.FilesDone)))
	}
	for _, k := range []struct {
		kind string
		n    int64
	}{{"get", m.reqs.Requests.Get}, {"put", m.reqs.Requests.Put}, {"list", m.reqs.Requests.List}, {"delete", m.reqs.Requests.Delete}} {
		emit(m.d.descRequests, prometheus.CounterValue, float64(k.n), k.kind)
	}
	emit(m.d.descRetries, prometheus.CounterValue, float64(m.reqs.Retries))
	emit(m.d.descRestarts, prometheus.CounterValue, float64(m.restarts))
	emit(m.d.descFailures, prometheus.GaugeValue, float64(m.failures))
	emit(m.d.descRunStart, prometheus.GaugeValue, float64(m.started.UnixMilli())/1e3)
	if !m.ended.IsZero() {
		emit(m.d.descRunEnd, prometheus.GaugeValue, float64(m.ended.UnixMilli())/1e3)
		emit(m.d.descRunExit, prometheus.GaugeValue, float64(m.exitCode))
	}
}
