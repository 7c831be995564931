package expr

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Option configures Compile, CompileFilter and CompileProjection.
type Option func(*options)

type options struct {
	funcs *Functions
}

// WithFunctions makes the user-defined functions of fs callable in the
// expressions compiled with this option. A compiled expression keeps the
// functions it calls: registering more later does not change it.
func WithFunctions(fs *Functions) Option {
	return func(o *options) { o.funcs = fs }
}

func makeOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// Functions is a set of user-defined scalar functions, passed to the
// compilers with [WithFunctions]. The zero value is empty and ready to use;
// it is safe for concurrent use.
//
// A function is a Go func whose parameters are int64, float64, string, bool
// or time.Time and whose result is one of those, optionally followed by a
// bool that is false to return null: func(string) string, func(int64,
// float64) (float64, bool), func(time.Time) time.Time. An int64 argument is
// accepted where float64 is expected; a timestamp of any unit arrives as a
// time.Time in UTC; a time.Time result becomes a timestamp[us, UTC].
//
// The contract, which floe relies on and cannot check:
//   - Deterministic: the same arguments always give the same result, with
//     no side effects and no reading of clocks, files or randomness. A re-run
//     epoch must produce the same rows, and calls on constant arguments are
//     evaluated once at compile time.
//   - Safe for concurrent use: compiled expressions are shared by goroutines.
//   - Total: it is called for every row whose arguments are all non-null
//     (a null argument gives null without a call), including rows a
//     conditional does not pick, because both branches of a conditional are
//     evaluated over the batch. Return (zero, false) for "no value".
//
// A panic in a function fails the evaluation of the batch with an error
// naming the function; it does not crash the process. String arguments are
// copies: a function may keep them.
type Functions struct {
	mu sync.RWMutex
	m  map[string]*udf
}

// udf is one registered function.
type udf struct {
	name   string
	fn     reflect.Value
	in     []kind // kInt, kFloat, kString, kBool or kTimestamp
	out    kind
	withOK bool                        // the result is (T, bool)
	fast   func(args []*vec, out *vec) // typed path for common signatures, or nil
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedNames are words of expr-lang's syntax a call cannot be named.
var reservedNames = map[string]bool{
	"and": true, "or": true, "not": true, "in": true, "contains": true, "matches": true,
	"startsWith": true, "endsWith": true, "let": true, "if": true, "else": true,
	"nil": true, "true": true, "false": true,
}

var timeType = reflect.TypeOf(time.Time{})

func kindOfGo(t reflect.Type) (kind, bool) {
	switch {
	case t == timeType:
		return kTimestamp, true
	case t.Kind() == reflect.Int64 && t.PkgPath() == "":
		return kInt, true
	case t.Kind() == reflect.Float64 && t.PkgPath() == "":
		return kFloat, true
	case t.Kind() == reflect.String && t.PkgPath() == "":
		return kString, true
	case t.Kind() == reflect.Bool && t.PkgPath() == "":
		return kBool, true
	}
	return 0, false
}

// Register adds fn under name. It fails when name is not an identifier,
// names a built-in function or is already registered, or when fn's signature
// is not one Functions supports (see the type's documentation).
func (fs *Functions) Register(name string, fn any) error {
	if !identRE.MatchString(name) {
		return fmt.Errorf("expr: register %q: a function name must be an identifier", name)
	}
	if _, ok := builtins[name]; ok {
		return fmt.Errorf("expr: register %q: a built-in function has that name", name)
	}
	if _, ok := refused[name]; ok || reservedNames[name] {
		return fmt.Errorf("expr: register %q: the name is reserved", name)
	}
	v := reflect.ValueOf(fn)
	if !v.IsValid() || v.Kind() != reflect.Func || v.IsNil() {
		return fmt.Errorf("expr: register %q: want a func, got %T", name, fn)
	}
	t := v.Type()
	sig := "int64, float64, string, bool or time.Time"
	if t.IsVariadic() {
		return fmt.Errorf("expr: register %q: variadic functions are not supported", name)
	}
	u := &udf{name: name, fn: v}
	for i := 0; i < t.NumIn(); i++ {
		k, ok := kindOfGo(t.In(i))
		if !ok {
			return fmt.Errorf("expr: register %q: parameter %d is %s; parameters must be %s", name, i+1, t.In(i), sig)
		}
		u.in = append(u.in, k)
	}
	switch {
	case t.NumOut() == 2 && t.Out(1).Kind() == reflect.Bool && t.Out(1).PkgPath() == "":
		u.withOK = true
	case t.NumOut() != 1:
		return fmt.Errorf("expr: register %q: want one result, or a result and a bool (false for null); got %s", name, t)
	}
	k, ok := kindOfGo(t.Out(0))
	if !ok {
		return fmt.Errorf("expr: register %q: the result is %s; it must be %s", name, t.Out(0), sig)
	}
	u.out = k
	u.fast = fastUDF(fn)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, dup := fs.m[name]; dup {
		return fmt.Errorf("expr: register %q: already registered", name)
	}
	if fs.m == nil {
		fs.m = map[string]*udf{}
	}
	fs.m[name] = u
	return nil
}

// Names returns the registered names, sorted.
func (fs *Functions) Names() []string {
	if fs == nil {
		return nil
	}
	fs.mu.RLock()
	defer fs.mu.RUnlock()
	names := make([]string, 0, len(fs.m))
	for n := range fs.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (fs *Functions) lookup(name string) *udf {
	if fs == nil {
		return nil
	}
	fs.mu.RLock()
	defer fs.mu.RUnlock()
	return fs.m[name]
}

func typOfKind(k kind) typ {
	if k == kTimestamp {
		return tsMicro
	}
	return typ{k: k}
}

func (c *compiler) callUDF(f fcall, u *udf) (node, error) {
	xs := make([]node, len(f.xs))
	for i, k := range u.in {
		want := typOfKind(k)
		if k == kTimestamp {
			want = typ{k: kTimestamp}
		}
		x, err := c.arg(f, i, "", want)
		if err != nil {
			return nil, err
		}
		xs[i] = x
	}
	return c.done(f.at, &udfNode{u: u, args: xs, t: typOfKind(u.out)}, xs...)
}

// udfNode calls a user-defined function on every row whose arguments are
// all non-null.
type udfNode struct {
	u    *udf
	args []node
	t    typ
}

func (n *udfNode) typ() typ { return n.t }

func (n *udfNode) eval(e *env) (out *vec, err error) {
	vs := make([]*vec, len(n.args))
	allConst := true
	for i, a := range n.args {
		v, err := a.eval(e)
		if err != nil {
			return nil, err
		}
		if v.isNullConst() {
			return nullConst(n.t), nil
		}
		vs[i] = v
		allConst = allConst && v.isConst
	}
	ln := e.n
	if allConst {
		ln = 1
	}
	out = newVec(n.t, ln, allConst)
	valid := make([]bool, ln)
	if shared := andValidAll(vs, ln); shared != nil {
		copy(valid, shared)
	} else {
		fill(valid, true)
	}
	out.valid = valid
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("function %s() panicked: %v", n.u.name, r)
		}
	}()
	if n.u.fast != nil && !n.u.withOK {
		n.u.fast(vs, out)
	} else {
		n.callReflect(vs, out)
	}
	for _, ok := range out.valid {
		if !ok {
			return out, nil
		}
	}
	out.valid = nil
	return out, nil
}

func (n *udfNode) callReflect(vs []*vec, out *vec) {
	in := make([]reflect.Value, len(vs))
	strides := make([]int, len(vs))
	for k, v := range vs {
		strides[k] = stride(v.isConst)
	}
	for i, ok := range out.valid {
		if !ok {
			continue
		}
		for k, v := range vs {
			in[k] = reflect.ValueOf(getArg(v, i*strides[k]))
		}
		res := n.u.fn.Call(in)
		if n.u.withOK && !res[1].Bool() {
			out.valid[i] = false
			continue
		}
		setResult(out, i, res[0].Interface())
	}
}

// getArg returns row j of v as the Go value a function receives.
func getArg(v *vec, j int) any {
	switch v.t.k {
	case kInt:
		return v.i[j]
	case kFloat:
		return v.f[j]
	case kString:
		return strings.Clone(v.str()[j])
	case kBool:
		return v.b[j]
	}
	return tsTime(v.i[j], unitFactor(v.t.unit))
}

func setResult(out *vec, i int, r any) {
	switch x := r.(type) {
	case int64:
		out.i[i] = x
	case float64:
		out.f[i] = x
	case string:
		out.s[i] = x
	case bool:
		out.b[i] = x
	case time.Time:
		out.i[i] = x.UnixMicro()
	default: // a named type of a supported kind
		rv := reflect.ValueOf(r)
		switch out.t.k {
		case kInt:
			out.i[i] = rv.Int()
		case kFloat:
			out.f[i] = rv.Float()
		case kString:
			out.s[i] = rv.String()
		case kBool:
			out.b[i] = rv.Bool()
		}
	}
}

// tsTime converts ticks of f per second to a UTC time.Time.
func tsTime(v, f int64) time.Time {
	secs := floorDiv(v, f)
	return time.Unix(secs, (v-secs*f)*(1_000_000_000/f)).UTC()
}

// fastUDF returns a typed kernel for the most common one-argument
// signatures, avoiding reflect.Call per row; nil for the others.
func fastUDF(fn any) func(args []*vec, out *vec) {
	switch f := fn.(type) {
	case func(string) string:
		return fast1(f, strArg, func(o *vec, i int, r string) { o.s[i] = r })
	case func(string) int64:
		return fast1(f, strArg, func(o *vec, i int, r int64) { o.i[i] = r })
	case func(string) float64:
		return fast1(f, strArg, func(o *vec, i int, r float64) { o.f[i] = r })
	case func(string) bool:
		return fast1(f, strArg, func(o *vec, i int, r bool) { o.b[i] = r })
	case func(int64) int64:
		return fast1(f, intArg, func(o *vec, i int, r int64) { o.i[i] = r })
	case func(int64) string:
		return fast1(f, intArg, func(o *vec, i int, r string) { o.s[i] = r })
	case func(int64) bool:
		return fast1(f, intArg, func(o *vec, i int, r bool) { o.b[i] = r })
	case func(int64) float64:
		return fast1(f, intArg, func(o *vec, i int, r float64) { o.f[i] = r })
	case func(float64) float64:
		return fast1(f, floatArg, func(o *vec, i int, r float64) { o.f[i] = r })
	case func(float64) int64:
		return fast1(f, floatArg, func(o *vec, i int, r int64) { o.i[i] = r })
	case func(float64) bool:
		return fast1(f, floatArg, func(o *vec, i int, r bool) { o.b[i] = r })
	case func(float64) string:
		return fast1(f, floatArg, func(o *vec, i int, r string) { o.s[i] = r })
	}
	return nil
}

func strArg(v *vec, j int) string    { return strings.Clone(v.str()[j]) }
func intArg(v *vec, j int) int64     { return v.i[j] }
func floatArg(v *vec, j int) float64 { return v.f[j] }

func fast1[A, R any](f func(A) R, get func(*vec, int) A, set func(*vec, int, R)) func(args []*vec, out *vec) {
	return func(args []*vec, out *vec) {
		a := args[0]
		sa := stride(a.isConst)
		for i, ok := range out.valid {
			if ok {
				set(out, i, f(get(a, i*sa)))
			}
		}
	}
}
