package spec

import "strings"

// The sources and the root sink of either form.
//
// Code that reads a pipeline's sources or its sink goes through these
// accessors rather than Source and Sink, which only the linear form sets:
// a graph pipeline's settings are its named sources' own (each source's
// max_rows_per_epoch, max_rejected_fraction, capture, on_error and
// watermark apply to that source's files), never a merge of them.

// SourceBlock is one source of a pipeline with the spec path naming its
// block in messages.
type SourceBlock struct {
	// Name is the source's name in the graph form, "" in the linear form.
	Name string
	// Field is the block's path: "source", or "sources.<name>".
	Field  string
	Source *Source
}

// SourceBlocks returns p's sources: the linear form's one source, or the
// graph form's named sources in declaration order.
func (p *Pipeline) SourceBlocks() []SourceBlock {
	if len(p.Sources) == 0 {
		return []SourceBlock{{Field: "source", Source: &p.Source}}
	}
	out := make([]SourceBlock, len(p.Sources))
	for i := range p.Sources {
		ns := &p.Sources[i]
		out[i] = SourceBlock{Name: ns.Name, Field: "sources." + ns.Name, Source: &ns.Source}
	}
	return out
}

// SourceOfKey returns the source a source file's key belongs to and the
// key below that source. In the linear form every key is the source's own;
// in the graph form a key is "<source>/<key>". ok is false when the key's
// first segment names no source.
func (p *Pipeline) SourceOfKey(key string) (b SourceBlock, rel string, ok bool) {
	if len(p.Sources) == 0 {
		return SourceBlock{Field: "source", Source: &p.Source}, key, true
	}
	name, rest, _ := strings.Cut(key, "/")
	for i := range p.Sources {
		if ns := &p.Sources[i]; ns.Name == name {
			return SourceBlock{Name: name, Field: "sources." + name, Source: &ns.Source}, rest, true
		}
	}
	return SourceBlock{}, key, false
}

// RootSink returns the sink whose location is the pipeline's sink
// identity: the linear form's sink, or the graph form's first sink (the
// further sinks are written beside it, each at its own URL).
func (p *Pipeline) RootSink() *Sink {
	if len(p.Sinks) > 0 {
		return &p.Sinks[0].Sink
	}
	return &p.Sink
}

// RejectedURL returns where the sources' rejected rows go: source.
// rejected_url, or the rejected_url the graph form's sources share
// (validation refuses sources that name different ones); "" means under
// the sink.
func (p *Pipeline) RejectedURL() string {
	for _, b := range p.SourceBlocks() {
		if b.Source.RejectedURL != "" {
			return b.Source.RejectedURL
		}
	}
	return ""
}

// RejectedField names the field RejectedURL comes from, for messages.
func (p *Pipeline) RejectedField() string {
	for _, b := range p.SourceBlocks() {
		if b.Source.RejectedURL != "" {
			return b.Field + ".rejected_url"
		}
	}
	return "source.rejected_url"
}
