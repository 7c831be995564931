package owner

import (
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"

	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// locKind says what a pipeline does with a location.
type locKind int

const (
	locSource    locKind = iota // read: input files
	locSink                     // written: outputs (and, by default, _rejected/)
	locStateRoot                // state.url: the root the pipeline folders are under
	locState                    // <state.url>/<name>: the pipeline's own state
	locSide                     // written: late and rejected rows
	locLookup                   // read: a lookup stage's table
)

// pipeLoc is one location a pipeline names: the spec field naming it, its
// URL and its normalised form (store.ParseLocation).
type pipeLoc struct {
	field, url string
	kind       locKind
	l          store.Location
}

// what names the location in messages: its field and URL.
func (x pipeLoc) what() string {
	if x.kind == locState {
		return "the pipeline's state folder " + store.Redact(x.url) + " (state.url + name)"
	}
	return x.field + " " + store.Redact(x.url)
}

// pipelineLocations returns every location p names, in the linear or the
// graph form: sources, sinks, the state root
// and the pipeline's state folder, side outputs, lookup tables. Locations
// are normalised with store.ParseLocation: clean paths, resolved symbolic
// links, localhost, bucket and prefix, never compared as URL text. A
// rejected_url the sources of a graph share is listed once.
func pipelineLocations(p *spec.Pipeline) ([]pipeLoc, error) {
	stateURL, err := PipelineStateURL(p)
	if err != nil {
		return nil, err
	}
	type raw struct {
		field, url string
		kind       locKind
	}
	var rs []raw
	if len(p.Sources) > 0 { // the graph form
		rejected := map[string]bool{}
		for _, ns := range p.Sources {
			rs = append(rs, raw{"sources." + ns.Name + ".url", ns.Source.URL, locSource})
			if u := ns.Source.RejectedURL; u != "" && !rejected[u] {
				rejected[u] = true
				rs = append(rs, raw{"sources." + ns.Name + ".rejected_url", u, locSide})
			}
		}
		for _, sk := range p.Sinks {
			rs = append(rs, raw{"sinks." + sk.Name + ".url", sk.Sink.URL, locSink})
		}
		for _, st := range p.Stages {
			rs = append(rs, raw{"stages." + st.Name + ".late_url", st.LateURL, locSide})
			if st.Lookup != nil {
				rs = append(rs, raw{"stages." + st.Name + ".lookup.url", st.Lookup.URL, locLookup})
			}
		}
	} else {
		rs = append(rs, raw{"source.url", p.Source.URL, locSource}, raw{"sink.url", p.Sink.URL, locSink},
			raw{"source.late_url", p.Source.LateURL, locSide}, raw{"source.rejected_url", p.Source.RejectedURL, locSide})
	}
	rs = append(rs, raw{"state.url", stateURL, locState}, raw{"state.url", p.State.URL, locStateRoot})
	var out []pipeLoc
	for _, x := range rs {
		if x.url == "" {
			continue
		}
		l, err := store.ParseLocation(x.url)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", x.field, err)
		}
		out = append(out, pipeLoc{x.field, x.url, x.kind, l})
	}
	return out, nil
}

// relation describes how location a lies to b, for messages: "is inside",
// "contains" or "is".
func relation(a, b store.Location) string {
	switch {
	case a.Same(b):
		return "is"
	case b.Contains(a):
		return "is inside"
	}
	return "contains"
}

// CheckLocations refuses locations a pipeline cannot run with, before
// anything is opened for writing:
//   - mem:// (it lives only inside this process, so committed state and
//     outputs would vanish with it);
//   - a sink, the state or a side-output location inside a source (floe
//     would read its own files as input);
//   - side-output locations that overlap a sink, the state or each other
//     (their orphan cleanup would judge the other's files);
//   - a lookup table that overlaps (contains or lies inside) the state root,
//     the pipeline's state, a sink, a side output or a source (the table
//     would be floe's own files, or its files would be read as input).
//
// Locations are compared after normalisation (pipelineLocations), never as
// URL text. Sinks against each other are checkSinks'.
func CheckLocations(p *spec.Pipeline) error {
	locs, err := pipelineLocations(p)
	if err != nil {
		return err
	}
	for _, x := range locs {
		if x.l.Ephemeral() && x.kind != locLookup && x.kind != locStateRoot {
			return fmt.Errorf("%s %s: mem:// lives only inside this process, so what floe commits there vanishes when it exits; use a local folder or s3://", x.field, store.Redact(x.url))
		}
	}
	written := func(k locKind) bool { return k == locSink || k == locState || k == locSide }
	for _, src := range locs {
		if src.kind != locSource {
			continue
		}
		for _, x := range locs {
			if written(x.kind) && src.l.Contains(x.l) {
				return fmt.Errorf("%s %s is inside %s %s: floe would read its own files as input; put it elsewhere",
					x.field, store.Redact(x.url), src.field, store.Redact(src.url))
			}
		}
	}
	for i, a := range locs {
		for _, b := range locs[i+1:] {
			if a.kind == locSide && written(b.kind) || b.kind == locSide && written(a.kind) {
				if a.l.Overlaps(b.l) {
					return fmt.Errorf("%s %s and %s %s overlap: each side-output location needs a place of its own (its cleanup removes files it did not commit)",
						a.field, store.Redact(a.url), b.field, store.Redact(b.url))
				}
			}
		}
	}
	for _, lk := range locs {
		if lk.kind != locLookup {
			continue
		}
		for _, x := range locs {
			if x.kind == locLookup || !lk.l.Overlaps(x.l) {
				continue
			}
			why := "the table would hold floe's own files"
			if x.kind == locSource {
				why = "the table's files would be read as input, or input files as the table"
			}
			return fmt.Errorf("%s %s %s %s: %s; give the lookup table a location of its own",
				lk.field, store.Redact(lk.url), relation(lk.l, x.l), x.what(), why)
		}
	}
	return nil
}

// CheckOutputPath refuses a local file (dir false) or folder (dir true) a
// command-line flag would write, when it lies inside a location of the
// pipeline p: its state folder, a sink, a side output, a lookup table or a
// source (a folder also when it contains one). Tools that promise to write
// nothing to a pipeline (floe state export --out, floe replay --out and
// --emit-test, floe run --metrics-file) call it before writing anything.
// The path is made absolute against the working directory and compared as
// the spec's locations are (store.ParseLocation). flag names the flag in
// the error, e.g. "--out".
func CheckOutputPath(p *spec.Pipeline, flag, path string, dir bool) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	dst, err := store.ParseLocation(abs)
	if err != nil {
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	locs, err := pipelineLocations(p)
	if err != nil {
		return err
	}
	for _, x := range locs {
		if x.kind == locStateRoot {
			continue // other pipelines' folders are theirs; the pipeline's own is locState
		}
		if x.l.Contains(dst) || dir && dst.Contains(x.l) {
			return fmt.Errorf("%s %s %s %s of pipeline %s: it would write into the pipeline (its files there are floe's, or read by it); write it elsewhere",
				flag, path, relation(dst, x.l), x.what(), p.Name)
		}
	}
	return nil
}

// PipelineStateURL returns <state-url>/<pipeline>.
func PipelineStateURL(p *spec.Pipeline) (string, error) {
	u, err := url.Parse(p.State.URL)
	if err != nil {
		return "", fmt.Errorf("state.url: %w", err)
	}
	u.Path = path.Join("/", u.Path, p.Name)
	if u.Scheme == "s3" || u.Scheme == "mem" {
		u.Path = strings.TrimPrefix(u.Path, "/")
		if u.Path != "" {
			u.Path = "/" + u.Path
		}
	}
	return u.String(), nil
}
