package store

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"strings"
)

// Location is the canonical identity of a store root, for deciding whether
// two URLs name the same storage or one lies inside the other (a sink or
// state directory inside a pipeline's source) without comparing URL text.
// Build it with ParseLocation.
type Location struct {
	// Scheme is "file", "s3" or "mem".
	Scheme string
	// Path (file) is absolute and cleaned, with the symbolic links of its
	// existing part resolved.
	Path string
	// Bucket (s3) is the bucket name, lower case.
	Bucket string
	// Prefix (s3) is the cleaned key prefix, without leading or trailing
	// slash; "" is the whole bucket.
	Prefix string
	// Endpoint (s3) is the endpoint parameter reduced to
	// scheme://host[:port][/path], lower case, without a default port; ""
	// means the AWS default endpoint. Credentials and the other connection
	// parameters (region, use_path_style, ...) are not part of it.
	Endpoint string
}

// ParseLocation returns the Location named by rawURL, a URL Open accepts:
// file:///abs/dir (host empty or "localhost"), a plain absolute path, mem://,
// or s3://bucket/prefix?endpoint=.... A relative path is refused (resolve it
// first), and so is a URL carrying credentials (user:password@, in the URL
// or its endpoint parameter); the error never shows them. Query parameters
// starting with "floe_" are ignored, as Open ignores them.
//
// For file: the path is cleaned lexically, as Open cleans it (so
// "/D/other/../in" is "/D/in" and "/D//in" is "/D/in"), then the longest
// existing ancestor has its symbolic links resolved, so two spellings of one
// directory compare equal even when its tail does not exist yet.
func ParseLocation(rawURL string) (Location, error) {
	shown := Redact(rawURL)
	u, err := url.Parse(rawURL)
	if err != nil {
		return Location{}, fmt.Errorf("store: location %q: not a URL", shown)
	}
	if u.User != nil {
		return Location{}, fmt.Errorf("store: location %q: credentials in the URL are not accepted; they come from the AWS credential chain", shown)
	}
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, floeParamPrefix) {
			q.Del(k)
		}
	}
	switch u.Scheme {
	case "":
		if !filepath.IsAbs(rawURL) {
			return Location{}, fmt.Errorf("store: location %q: a plain path must be absolute", shown)
		}
		return Location{Scheme: "file", Path: resolveExisting(filepath.Clean(rawURL))}, nil
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return Location{}, fmt.Errorf("store: location %q: file URL must have no host (file:///abs/dir)", shown)
		}
		if len(q) > 0 {
			return Location{}, fmt.Errorf("store: location %q: file URLs take no query parameters", shown)
		}
		p := filepath.FromSlash(u.Path)
		if !filepath.IsAbs(p) {
			return Location{}, fmt.Errorf("store: location %q: file URL needs an absolute path", shown)
		}
		return Location{Scheme: "file", Path: resolveExisting(filepath.Clean(p))}, nil
	case "mem":
		return Location{Scheme: "mem"}, nil
	case "s3":
		if u.Host == "" {
			return Location{}, fmt.Errorf("store: location %q: s3 URL needs a bucket name as host", shown)
		}
		l := Location{Scheme: "s3", Bucket: strings.ToLower(u.Host)}
		if p := strings.Trim(u.Path, "/"); p != "" {
			if p = path.Clean(p); p != "." {
				l.Prefix = strings.TrimPrefix(p, "/")
			}
		}
		if ep := q.Get("endpoint"); ep != "" {
			if err := checkEndpoint(ep); err != nil {
				return Location{}, fmt.Errorf("store: location %q: %w", shown, err)
			}
			l.Endpoint = canonicalEndpoint(ep)
		}
		return l, nil
	}
	return Location{}, fmt.Errorf("store: location %q: unsupported scheme %q (want file, mem or s3)", shown, u.Scheme)
}

// canonicalEndpoint reduces a checked endpoint URL to its identity.
func canonicalEndpoint(ep string) string {
	e, err := url.Parse(ep)
	if err != nil {
		return ep
	}
	scheme := strings.ToLower(e.Scheme)
	host, port := strings.ToLower(e.Hostname()), e.Port()
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		port = ""
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	p := strings.TrimRight(path.Clean("/"+e.Path), "/")
	return scheme + "://" + host + p
}

// resolveExisting resolves the symbolic links of the longest existing
// ancestor of the absolute, clean path p and appends the rest.
func resolveExisting(p string) string {
	rest := ""
	for cur := p; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// String returns the canonical URL of l: credential-free, with no connection
// parameter but the endpoint, fit for recording in metadata and for
// printing. Two Locations are Same exactly when their Strings are equal
// (mem:// excepted: it never is Same as anything).
func (l Location) String() string {
	switch l.Scheme {
	case "file":
		return (&url.URL{Scheme: "file", Path: filepath.ToSlash(l.Path)}).String()
	case "s3":
		u := url.URL{Scheme: "s3", Host: l.Bucket}
		if l.Prefix != "" {
			u.Path = "/" + l.Prefix
		}
		if l.Endpoint != "" {
			u.RawQuery = "endpoint=" + queryEscape(l.Endpoint)
		}
		return u.String()
	case "mem":
		return "mem://"
	}
	return ""
}

// Ephemeral reports whether l lives only in this process (mem://): every
// Open of it is a new, empty store that vanishes with the process. A
// pipeline must refuse it outside tests.
func (l Location) Ephemeral() bool { return l.Scheme == "mem" }

// IsMem reports whether rawURL names the in-process mem:// store.
func IsMem(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && u.Scheme == "mem"
}

// Same reports whether l and o name the same storage. mem:// locations are
// never the same: each Open makes a new store.
func (l Location) Same(o Location) bool {
	return l.Scheme != "mem" && l == o
}

// Contains reports whether o is l or lies inside it: a file path below l's
// directory, or a prefix below l's prefix in the same bucket at the same
// endpoint. Path segments are compared whole ("/d/in" does not contain
// "/d/inx"). mem:// contains nothing.
func (l Location) Contains(o Location) bool {
	if l.Scheme != o.Scheme {
		return false
	}
	switch l.Scheme {
	case "file":
		return within(l.Path, o.Path, string(filepath.Separator))
	case "s3":
		return l.Bucket == o.Bucket && l.Endpoint == o.Endpoint && (l.Prefix == "" || within(l.Prefix, o.Prefix, "/"))
	}
	return false
}

// Overlaps reports whether either of l and o contains the other.
func (l Location) Overlaps(o Location) bool { return l.Contains(o) || o.Contains(l) }

// within reports whether inner is outer or below it, by whole segments.
func within(outer, inner, sep string) bool {
	if inner == outer {
		return true
	}
	if !strings.HasSuffix(outer, sep) {
		outer += sep
	}
	return strings.HasPrefix(inner, outer)
}
