// Package exchange is the wire format of the rows workers route to each
// other through the bucket (package cluster carries the objects): a
// segment is one receiver's rows of one keyed stage, per input a u64
// length and an Arrow IPC stream under the plan's schema (Encode, Append,
// Decode), with rows whose schema differs from the plan's only in
// nullability relabelled (Conform). Decode reads the IPC messages in place,
// without copying their bodies.
package exchange
