// Package spec defines a floe pipeline: its YAML form, the Go types it
// decodes into, a small fluent builder for pipelines written in Go, and the
// validation that runs before any epoch does.
//
// A spec file is read with Load (or Parse for bytes). Decoding walks the YAML
// AST itself rather than reflecting into structs, so that
//   - every problem is reported at once, each as a *FieldError naming the
//     file, line, column and field path ("clicks.yaml:9:40:
//     operators[1].window.tumbling: invalid duration ...");
//   - unknown keys are rejected with a "did you mean" hint;
//   - mapping order is kept where it is meaningful: schema columns,
//     project outputs and window aggregates.
//
// URLs: a value with a scheme ("s3://b/p", "file:///d", "mem://") is kept as
// written; a plain path is a local directory, and a relative one resolves
// against the spec file's directory, so a spec means the same from whatever
// directory it is started in. See ResolveURL.
//
// The package does no object-store I/O; Load only reads the spec file.
package spec
