// Package owner decides who owns which location. Its identity half
// (identity.go) compares a spec with the pipeline identity recorded in the
// head's generation and with each sink's marker, and claims a sink for the
// pipeline before the first write (PlanIdentity, IdentityPlan); its
// locations half (locations.go) refuses specs whose locations overlap (a
// sink inside the source, two sinks sharing a folder) and command outputs
// (--out, --emit-test, --metrics-file) that would land inside a
// pipeline's locations. It reads stores and writes only sink markers.
package owner
