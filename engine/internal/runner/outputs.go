package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/floe-dev/floe/engine/internal/sinks"
	"github.com/floe-dev/floe/spec"
)

// OutputURLs returns the URL of every committed output file, in commit
// order: of every sink, or (sink set) of the named sink only.
func OutputURLs(ctx context.Context, p *spec.Pipeline, sink string) ([]string, error) {
	if sink != "" {
		names := []string{"sink"}
		if len(p.Sinks) > 0 {
			names = names[:0]
			for _, s := range p.Sinks {
				names = append(names, s.Name)
			}
		}
		if !slices.Contains(names, sink) {
			return nil, fmt.Errorf("--sink %s: the pipeline has no such sink (its sinks: %s)", sink, strings.Join(names, ", "))
		}
	}
	outs, err := Outputs(ctx, p)
	if err != nil {
		return nil, err
	}
	urls := make([]string, 0, len(outs))
	for _, o := range outs {
		name, _ := sinks.SplitSinkPath(o)
		if sink != "" {
			own := name == sink || name == "" && (len(p.Sinks) == 0 || p.Sinks[0].Name == sink)
			if !own {
				continue
			}
		}
		base, rel, err := sinks.URL(p, o)
		if err != nil {
			return nil, err
		}
		urls = append(urls, base+"/"+rel)
	}
	return urls, nil
}
