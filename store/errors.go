package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"unicode/utf8"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"gocloud.dev/gcerrors"
)

// reservedPrefix starts every name the file:// backend keeps for itself (temp
// files, lock files). Keys may not contain a segment starting with it.
const reservedPrefix = ".floe-"

// checkKey reports whether key obeys the Store key rules.
func checkKey(key string) error {
	if key == "" {
		return errors.New("empty key")
	}
	if !utf8.ValidString(key) {
		return fmt.Errorf("key %q is not valid UTF-8", key)
	}
	if strings.ContainsRune(key, 0) {
		return fmt.Errorf("key %q contains a NUL byte", key)
	}
	for _, seg := range strings.Split(key, "/") {
		switch {
		case seg == "":
			return fmt.Errorf("key %q has an empty segment (leading, trailing or double slash)", key)
		case seg == "." || seg == "..":
			return fmt.Errorf("key %q has a %q segment", key, seg)
		case strings.HasPrefix(seg, reservedPrefix):
			return fmt.Errorf("key %q has a segment starting with the reserved %q", key, reservedPrefix)
		}
	}
	return nil
}

func checkPutOptions(opts PutOptions) error {
	if opts.IfNotExist && opts.IfMatch != "" {
		return errors.New("IfNotExist and IfMatch are mutually exclusive")
	}
	return nil
}

// s3Transient lists S3 error codes that mean "try again".
var s3Transient = map[string]bool{
	"ConditionalRequestConflict": true, // 409: a concurrent conditional write is in flight
	"SlowDown":                   true, // 503
	"ServiceUnavailable":         true,
	"InternalError":              true,
	"RequestTimeout":             true,
	"OperationAborted":           true,
}

// classify returns the sentinel err maps to, or nil when none applies.
func classify(err error) error {
	if err == nil {
		return nil
	}
	for _, s := range []error{ErrNotFound, ErrPrecondition, ErrTransient, ErrCrashed} {
		if errors.Is(err, s) {
			return s
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil // the caller's context: never transient
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		switch {
		case code == "PreconditionFailed":
			return ErrPrecondition
		case code == "NoSuchKey" || code == "NotFound":
			return ErrNotFound
		case s3Transient[code]:
			return ErrTransient
		}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		switch c := re.HTTPStatusCode(); {
		case c == http.StatusPreconditionFailed:
			return ErrPrecondition
		case c == http.StatusNotFound:
			return ErrNotFound
		case c == http.StatusTooManyRequests, c >= 500:
			return ErrTransient
		}
	}
	if isNetworkTransient(err) {
		return ErrTransient
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return ErrNotFound
	case gcerrors.FailedPrecondition:
		return ErrPrecondition
	case gcerrors.ResourceExhausted:
		return ErrTransient
	}
	return nil
}

// isNetworkTransient reports connection resets, refused connections, broken
// pipes, unexpected EOFs and network timeouts.
func isNetworkTransient(err error) bool {
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe)
}

// wrapErr adds the operation and key to err and makes it match the sentinel
// it maps to. It returns nil for a nil err.
func wrapErr(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var tt *transportTimeout
	if errors.As(err, &tt) {
		// The rest of the chain (SDK operation, URL, "context canceled")
		// says nothing more: one line naming the operation, key and bound.
		return &TimeoutError{Op: op, Key: key, Deadline: tt.deadline, Limit: tt.limit}
	}
	s := classify(err)
	if s == nil || errors.Is(err, s) {
		return fmt.Errorf("store: %s %q: %w", op, key, err)
	}
	return fmt.Errorf("store: %s %q: %w: %w", op, key, s, err)
}
