// Package store is floe's only door to object storage.
//
// A Store holds whole objects under slash-separated keys relative to one root
// (a bucket, a bucket prefix, or a local directory). It offers exactly the
// primitives the commit protocol needs: whole-object reads that return a version
// token (ETag), create-if-absent, compare-and-swap on that token, ordered
// listing and idempotent deletes. Every implementation passes the conformance
// suite in storetest.
//
// Only this package imports gocloud.dev or the AWS SDK.
//
// # Opening
//
// [Open] takes a URL:
//
//	file:///abs/dir          a local directory (created if missing); a plain absolute path works too
//	mem://                   a fresh in-process store (the path is ignored; every Open is a new store)
//	s3://bucket/a/b?endpoint=http://127.0.0.1:9000&use_path_style=true&region=us-east-1
//
// For s3:// the URL path is a key prefix: s3://bucket/a/b holds its objects
// under "a/b/". Credentials come from the standard AWS chain (environment,
// shared config, instance or pod roles), never from the URL, and are never
// logged. Query parameters that start with "floe_" belong to layers above the
// store and are removed before the URL reaches gocloud.
//
// # Contract
//
//   - Get returns the object and its ETag in one request. The ETag is an opaque
//     token: the S3 ETag as the server sends it (quoted), or for file:// and
//     mem:// the hex of a truncated SHA-256 of the content. It changes whenever
//     the content changes. Two writes of identical bytes to file:// or mem://
//     yield the same ETag; the commit protocol never relies on telling them
//     apart (its objects carry attempt UUIDs).
//   - Put returns the new ETag without an extra request: on S3 it is taken
//     from the PutObject (or CompleteMultipartUpload) response.
//   - IfNotExist and IfMatch are atomic across goroutines and processes. On S3
//     the server enforces them (If-None-Match: *, If-Match). On file:// a create
//     is link(2) of a fully written, fsynced temp file (EEXIST means another
//     writer won), and every write and delete of a key holds an flock'd lock
//     file (striped by key hash, under <root>/.floe-locks/) so that an If-Match
//     read-compare-rename is one step for every process that opens the same
//     root. On mem:// a mutex serialises writes.
//   - Errors wrap exactly one of the sentinels when one applies: ErrNotFound,
//     ErrPrecondition, ErrTransient (S3 409 ConditionalRequestConflict, 5xx,
//     SlowDown, timeouts, connection resets, request deadlines). The
//     caller's context errors are returned wrapped, never as ErrTransient.
//   - A Store returned by Open does not retry: the AWS SDK retryer is disabled
//     so that a conditional write is sent exactly once per call and an
//     ambiguous outcome is never hidden inside the SDK. Wrap it with
//     [WithRetry]; a retried conditional write that ends in a precondition
//     failure after a transient error returns an error matching
//     ErrOutcomeUnknown (and ErrPrecondition and ErrTransient): the caller must
//     read the object back to learn whether its own write landed.
//   - [ReadRange] reads part of an object in one request (S3: a ranged
//     GetObject, billed as one GET; file://: a positioned read), clipped at
//     the object's end. The exchange between workers (package cluster) reads
//     each receiver's segment of a sender's object this way.
//   - Key segments starting with ".floe-" are reserved (temp and lock files of
//     file://) and rejected on every backend so all backends accept the same keys.
//   - On file:// a key cannot also be a prefix directory of another key ("a" and
//     "a/b"); S3 allows it. floe's layout never does it.
//
// # Deadlines and retries
//
// No S3 request waits forever. The HTTP transport of an S3 store bounds the
// wait for each response's headers (RequestTimeout, counted from the last
// byte of the request sent; default 30s) and each wait for more of a
// response body (IdleTimeout; default 30s), so a large transfer that keeps
// moving is never cut but a server that accepts a connection and goes
// silent is. A request that hits a deadline fails with a *TimeoutError,
// which matches ErrTransient and reads as one line naming the operation,
// the key and the deadline.
//
// [WithRetry] retries ErrTransient with exponential backoff and full jitter
// for a bounded time (RetryPolicy.MaxElapsed, default 45s; MaxAttempts
// optional), bounds each whole operation (OpTimeout, default 10m), carries
// its RequestTimeout and IdleTimeout down to the transport through the
// context, logs every retry at slog Debug (op, key, attempt, delay, cause)
// and counts calls, tries, retries, timeouts and give-ups per kind
// ([Retrying.Stats], diffed per epoch with [RetryStats.Sub]).
//
// A Delete on S3 is one DeleteObject request (S3 reports success for a
// missing key, so no HeadObject is needed to stay idempotent).
//
// # Locations and secrets
//
// [ParseLocation] gives the canonical identity of a store URL (a resolved
// file path, or bucket + prefix + endpoint), with [Location.Contains] and
// [Location.Same] to check that a sink or state location is not inside a
// source whatever the URL spelling, and [Location.Ephemeral] / [IsMem] to
// refuse mem:// outside tests. [Redact] removes user info and secret-looking
// query parameters from any URL before it is printed; Open refuses
// credentials in the URL and in its endpoint parameter.
//
// # Testing
//
// [NewFaulty] wraps a Store and injects crashes, failures, delays and
// throttling at chosen calls; storetest.Run is the conformance suite every
// backend passes (mem, file and a real S3 server, see internal/s3test, also
// through internal/faultproxy with 20% of the requests faulted).
package store
