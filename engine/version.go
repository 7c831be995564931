package engine

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/floe-dev/floe/engine/internal/dataflow"
	"github.com/floe-dev/floe/manifest"
	"github.com/floe-dev/floe/operators"
)

// Version is what `floe version` prints: the build and the on-storage
// formats this release writes and reads.
type Version struct {
	Module   string   `json:"module"`
	Version  string   `json:"version"` // the module version, "(devel)" for a source build
	Revision string   `json:"revision,omitempty"`
	Time     string   `json:"time,omitempty"`
	Modified bool     `json:"modified,omitempty"` // built from a work tree with changes
	Go       string   `json:"go"`
	Formats  []Format `json:"formats"`
}

// Format is one on-storage format: what this release writes and reads.
type Format struct {
	Name   string `json:"name"`
	Writes string `json:"writes"`
	Reads  string `json:"reads"`
}

// BuildVersion reads the build information of the running binary.
func BuildVersion() Version {
	v := Version{Module: "github.com/floe-dev/floe", Version: "(unknown)"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Module, v.Version, v.Go = bi.Main.Path, bi.Main.Version, bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.time":
				v.Time = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
		if v.Module == "" {
			v.Module = "github.com/floe-dev/floe"
		}
	}
	v.Formats = []Format{
		{Name: "manifest documents (_latest, _generation, _manifest, sink marker, savepoint)",
			Writes: fmt.Sprint(manifest.FormatVersion), Reads: fmt.Sprintf("%d..%d", manifest.MinFormatVersion, manifest.FormatVersion)},
		{Name: "plan hash", Writes: fmt.Sprintf("v%d", dataflow.PlanEncodingVersion), Reads: fmt.Sprintf("v1..v%d", dataflow.PlanEncodingVersion)},
		{Name: "operator state", Writes: strings.Join(operators.StateFormats(), ", "), Reads: strings.Join(operators.StateFormats(), ", ")},
		{Name: "iceberg table", Writes: "format version 2", Reads: "format version 2"},
	}
	return v
}
