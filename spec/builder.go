package spec

import "time"

// New starts a pipeline in Go with the defaults a spec file gets. Chain the
// builder methods and finish with Validate:
//
//	p := spec.New("clicks").
//		FromFiles("/data/events", spec.JSONL, spec.Col("event_time", spec.TypeTimestamp), ...).
//		EventTime("event_time", 5*time.Second).
//		Filter("bytes > 0").
//		Window(spec.NewTumbling(time.Minute).By("user_id").Agg("clicks", spec.Count, "")).
//		ToFiles("/out/clicks", spec.Parquet).
//		StateAt("/state", 4)
//	err := p.Validate()
//
// The builder never fails; Validate reports every problem at once. Plain
// paths given to FromFiles, ToFiles and StateAt resolve against the current
// directory (see ResolveURL).
func New(name string) *Pipeline {
	p := &Pipeline{Name: name}
	p.SetDefaults()
	return p
}

// resolve turns a path into a URL, keeping the input when it cannot (so
// that Validate reports it).
func resolve(raw string) string {
	u, err := ResolveURL("", raw)
	if err != nil {
		return raw
	}
	return u
}

// FromFiles sets a files source at url in format with the given schema.
func (p *Pipeline) FromFiles(url string, format Format, schema ...Field) *Pipeline {
	p.Source.Type = SourceFiles
	p.Source.URL = resolve(url)
	p.Source.Format = format
	p.Source.Schema = append([]Field(nil), schema...)
	if format == CSV && p.Source.CSV == nil {
		p.Source.CSV = &CSVOptions{Header: true, Delimiter: ","}
	}
	return p
}

// EventTime names the event-time column and the watermark's bound on
// out-of-orderness.
func (p *Pipeline) EventTime(column string, maxOutOfOrderness time.Duration) *Pipeline {
	p.Source.EventTime = column
	p.Source.Watermark.MaxOutOfOrderness = maxOutOfOrderness
	return p
}

// Filter appends a filter operator.
func (p *Pipeline) Filter(expr string) *Pipeline {
	return p.AddOperator(Operator{Filter: &Filter{Expr: expr}})
}

// Project appends a project operator with the given output columns, in order.
func (p *Pipeline) Project(cols ...Projection) *Pipeline {
	return p.AddOperator(Operator{Project: &Project{Columns: append([]Projection(nil), cols...)}})
}

// Window appends a window operator.
func (p *Pipeline) Window(w *Window) *Pipeline {
	return p.AddOperator(Operator{Window: w})
}

// AddOperator appends op, giving it a default id if it has none.
func (p *Pipeline) AddOperator(op Operator) *Pipeline {
	p.Operators = append(p.Operators, op)
	p.assignIDs()
	return p
}

// ToFiles sets a files sink at url in format.
func (p *Pipeline) ToFiles(url string, format Format) *Pipeline {
	p.Sink = Sink{Type: SinkFiles, URL: resolve(url), Format: format}
	return p
}

// StateAt sets the state URL and the parallelism.
func (p *Pipeline) StateAt(url string, parallelism int) *Pipeline {
	p.State.URL = resolve(url)
	p.State.Parallelism = parallelism
	return p
}

// NewTumbling returns a tumbling window of the given size.
func NewTumbling(size time.Duration) *Window { return &Window{Tumbling: size} }

// NewSliding returns a sliding window; size must be a multiple of slide.
func NewSliding(size, slide time.Duration) *Window {
	return &Window{Sliding: &SlidingWindow{Size: size, Slide: slide}}
}

// NewSession returns a session window that closes after gap without events.
func NewSession(gap time.Duration) *Window { return &Window{Session: &SessionWindow{Gap: gap}} }

// By sets the key columns.
func (w *Window) By(key ...string) *Window {
	w.Key = append([]string(nil), key...)
	return w
}

// Lateness sets the allowed lateness.
func (w *Window) Lateness(d time.Duration) *Window {
	w.AllowedLateness = d
	return w
}

// Agg appends the aggregate name = fn(column); column is "" for count().
func (w *Window) Agg(name string, fn AggFunc, column string) *Window {
	w.Aggregates = append(w.Aggregates, Aggregate{Name: name, Func: fn, Column: column})
	return w
}

// AggRenamed appends the aggregate name = fn(column) that was called
// renamedFrom before (`renamed_from:`): restored state of renamedFrom is
// kept under name.
func (w *Window) AggRenamed(name string, fn AggFunc, column, renamedFrom string) *Window {
	w.Aggregates = append(w.Aggregates, Aggregate{Name: name, Func: fn, Column: column, RenamedFrom: renamedFrom})
	return w
}
