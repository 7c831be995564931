package sinks

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/engine/internal/owner"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/spec"
	"github.com/floe-dev/floe/store"
)

// Pipelines with several sinks (the graph form's sinks:).
//
// The first sink is the pipeline's root sink: its outputs are listed by
// paths relative to its URL, exactly as the one sink of a linear pipeline,
// so a pipeline that gains a second sink keeps the paths it committed. A
// further sink <name> is listed as "@<name>/<path>" (relative to that
// sink's URL). The runner reaches every sink through one store, Mux,
// which sends "@<name>/..." keys to that sink and every other key to the
// root: the commit protocol (write under the attempt, verify, list the
// committed outputs, clean orphans) is the same for one sink or several,
// and one manifest commits every sink's outputs of an epoch at once.

// SplitSinkPath splits a combined output path into its sink's name ("" for
// the root sink) and the path relative to that sink.
func SplitSinkPath(p string) (sink, rel string) {
	if !strings.HasPrefix(p, manifest.ExtraSinkPrefix) {
		return "", p
	}
	sink, rel, _ = strings.Cut(p[len(manifest.ExtraSinkPrefix):], "/")
	return sink, rel
}

// CheckSinks refuses sink sets the runner cannot keep apart: two sinks at
// one location or one inside another (each cleans files it did not commit,
// so they would delete each other's), or a further sink that is an Iceberg
// table (one table per pipeline for now: its commit follows the epoch's).
func CheckSinks(p *spec.Pipeline) error {
	if len(p.Sinks) < 2 {
		return nil
	}
	for i, a := range p.Sinks {
		if i > 0 && a.Sink.Type == spec.SinkIceberg {
			return fmt.Errorf("sinks.%s: an iceberg sink must be the pipeline's first sink (one table per pipeline for now); move it first, or write this one as files", a.Name)
		}
		ua := strings.TrimSuffix(owner.IdentityOf(a.Sink.URL), "/") + "/"
		for _, b := range p.Sinks[:i] {
			ub := strings.TrimSuffix(owner.IdentityOf(b.Sink.URL), "/") + "/"
			switch {
			case ua == ub:
				return fmt.Errorf("sinks.%s.url: the same location as sinks.%s (%s); give each sink its own url", a.Name, b.Name, store.Redact(a.Sink.URL))
			case strings.HasPrefix(ua, ub) || strings.HasPrefix(ub, ua):
				return fmt.Errorf("sinks.%s.url: %s and sinks.%s's %s are one inside the other; give each sink a location of its own (siblings, not nested)",
					a.Name, store.Redact(a.Sink.URL), b.Name, store.Redact(b.Sink.URL))
			}
		}
	}
	return nil
}

// Mux is the combined store of a pipeline's sinks: "@<name>/<key>" is
// key of further sink name, any other key is the root sink's.
type Mux struct {
	root   store.Store
	names  []string // the further sinks, in spec order
	extras map[string]store.Store
}

// NewMux returns the combined store of a pipeline's sinks with root as
// its root sink; Add adds the further sinks.
func NewMux(root store.Store) *Mux { return &Mux{root: root, extras: map[string]store.Store{}} }

// Add adds further sink name, reached as "@<name>/...", after the others.
func (m *Mux) Add(name string, s store.Store) {
	m.names = append(m.names, name)
	m.extras[name] = s
}

func (m *Mux) route(key string) (store.Store, string, error) {
	name, rel := SplitSinkPath(key)
	if name == "" && !strings.HasPrefix(key, manifest.ExtraSinkPrefix) {
		return m.root, key, nil
	}
	s := m.extras[name]
	if s == nil {
		return nil, "", fmt.Errorf("output %q names no sink of the pipeline (its further sinks: %s): %w", key, strings.Join(m.names, ", "), store.ErrNotFound)
	}
	return s, rel, nil
}

func (m *Mux) Get(ctx context.Context, key string) ([]byte, string, error) {
	s, k, err := m.route(key)
	if err != nil {
		return nil, "", err
	}
	return s.Get(ctx, k)
}

func (m *Mux) Read(ctx context.Context, key string) ([]byte, error) {
	s, k, err := m.route(key)
	if err != nil {
		return nil, err
	}
	return store.Read(ctx, s, k)
}

func (m *Mux) Put(ctx context.Context, key string, data []byte, opts store.PutOptions) (string, error) {
	s, k, err := m.route(key)
	if err != nil {
		return "", err
	}
	return s.Put(ctx, k, data, opts)
}

func (m *Mux) Delete(ctx context.Context, key string) error {
	s, k, err := m.route(key)
	if err != nil {
		return err
	}
	return s.Delete(ctx, k)
}

// List lists the root sink (without keys that start with the further
// sinks' prefix: no file floe writes there does) and every further sink
// under its "@<name>/" prefix, sorted by combined key.
func (m *Mux) List(ctx context.Context, prefix string) ([]store.ObjectInfo, error) {
	var out []store.ObjectInfo
	if !strings.HasPrefix(prefix, manifest.ExtraSinkPrefix) {
		objs, err := m.root.List(ctx, prefix)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if !strings.HasPrefix(o.Key, manifest.ExtraSinkPrefix) {
				out = append(out, o)
			}
		}
	}
	for _, name := range m.names {
		dir := owner.ExtraSinkDir(name) + "/"
		if !strings.HasPrefix(dir, prefix) && !strings.HasPrefix(prefix, dir) {
			continue
		}
		sub := ""
		if strings.HasPrefix(prefix, dir) {
			sub = prefix[len(dir):]
		}
		objs, err := m.extras[name].List(ctx, sub)
		if err != nil {
			return nil, fmt.Errorf("sink %s: %w", name, err)
		}
		for _, o := range objs {
			o.Key = dir + o.Key
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b store.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (m *Mux) Close() error {
	err := m.root.Close()
	for _, name := range m.names {
		if e := m.extras[name].Close(); err == nil {
			err = e
		}
	}
	return err
}

// URL returns the URL of the sink a combined output path belongs to
// (its query dropped: connection settings) and the path relative to it.
func URL(p *spec.Pipeline, path string) (string, string, error) {
	name, rel := SplitSinkPath(path)
	url := p.RootSink().URL
	if name != "" || strings.HasPrefix(path, manifest.ExtraSinkPrefix) {
		i := slices.IndexFunc(dataflow.ExtraSinks(p), func(s spec.NamedSink) bool { return s.Name == name })
		if i < 0 {
			return "", "", fmt.Errorf("committed output %s names sink %q, which the spec no longer has", path, name)
		}
		url = dataflow.ExtraSinks(p)[i].Sink.URL
	}
	if i := strings.IndexByte(url, '?'); i >= 0 {
		url = url[:i]
	}
	return strings.TrimSuffix(url, "/"), rel, nil
}
