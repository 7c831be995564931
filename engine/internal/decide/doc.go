// Package decide is the decide step of an epoch: which of the pending
// source files the epoch takes (per-source limits, the memory budget,
// round-robin across inputs) and the watermark it reaches (per input: max
// event time minus max_out_of_orderness, idle inputs not holding it back).
// Its functions are pure: they read the committed head, the listing and
// the clock, and no store or runner field, so engine/testdata/decide drives
// them as scenario files, and a replay decides exactly as the run did.
package decide
