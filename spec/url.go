package spec

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// ResolveURL turns a spec's location into a blob URL. A value with a scheme
// ("s3://bucket/prefix?endpoint=...", "file:///abs", "mem://", "gs://b") is
// returned unchanged. Anything else is a local directory: a relative path is
// joined to baseDir (the current directory when empty), cleaned, and
// returned as a file:// URL, e.g. "../events" in /srv/p -> "file:///srv/events".
func ResolveURL(baseDir, raw string) (string, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", fmt.Errorf("empty URL")
	}
	if scheme, _, ok := strings.Cut(s, "://"); ok {
		if !validScheme(scheme) {
			return "", fmt.Errorf("invalid URL %q: bad scheme %q", raw, scheme)
		}
		if _, err := url.Parse(s); err != nil {
			return "", fmt.Errorf("invalid URL %q: %v", raw, unwrapURLError(err))
		}
		return s, nil
	}
	if strings.HasPrefix(s, "~") {
		return "", fmt.Errorf("path %q: ~ is not expanded; write an absolute path or one relative to the spec file", raw)
	}
	p := filepath.FromSlash(s)
	if !filepath.IsAbs(p) {
		base := baseDir
		if base == "" {
			wd, err := os.Getwd()
			if err != nil {
				return "", fmt.Errorf("resolve %q: %w", raw, err)
			}
			base = wd
		}
		p = filepath.Join(base, p)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", raw, err)
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), nil
}

// validScheme reports whether s is an RFC 3986 scheme.
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// checkURL reports why u is not a resolved URL, or "".
func checkURL(u string) string {
	scheme, _, ok := strings.Cut(u, "://")
	if !ok {
		return fmt.Sprintf("%q is not a URL; use an absolute URL such as file:///dir or s3://bucket/prefix (ResolveURL turns paths into URLs)", u)
	}
	if !validScheme(scheme) {
		return fmt.Sprintf("invalid URL %q: bad scheme %q", u, scheme)
	}
	if _, err := url.Parse(u); err != nil {
		return fmt.Sprintf("invalid URL %q: %v", u, unwrapURLError(err))
	}
	return ""
}
