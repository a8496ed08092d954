package main

// Configuration is written once: each flag is a binding, a row of a
// command's bindings() table that ties the flag's name and help to the
// field it sets. Everything else is derived from the bindings: the
// default (the field's value when the flag is registered), the
// environment variable (envName), the shell completion of an enum's
// values, the flag a bridge.Options validation error names (fieldFlags),
// and README's Configuration table (docs.go). Adding a flag is one row
// plus "go test ./cmd/tfsbridge -run TestReadmeConfiguration -update".

import (
	"encoding"
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tfsbridge/tfsbridge/internal/fileread"
	"github.com/tfsbridge/tfsbridge/proxy/bridge"
)

// binding is one flag bound to one field.
type binding struct {
	name  string      // the flag, --name
	help  string      // one paragraph, plain text; a `word` in backquotes names the value in --help
	value pflag.Value // the field, through its parser
	// target points at the field, so that a bridge.Options validation
	// error on it can name the flag.
	target any
	// own gives the flag the command-prefixed variable
	// TFSBRIDGE_<COMMAND>_<FLAG>: its meaning or default is the command's
	// own (the mock's and the demo's listen addresses).
	own bool
	// values are an enum's values, offered by shell completion.
	values []string
	// file is a path: the shell completes file names.
	file bool
	// defaultDoc replaces the default in README's table when it is
	// computed at start (from the memory limit, say).
	defaultDoc string
}

// commandEnv marks b as read from TFSBRIDGE_<COMMAND>_<FLAG>.
func (b binding) commandEnv() binding { b.own = true; return b }

// completes offers values to shell completion (for flags whose value
// type validates itself, such as a TextUnmarshaler).
func (b binding) completes(values ...string) binding { b.values = values; return b }

// defaultIs documents a computed default in words.
func (b binding) defaultIs(doc string) binding { b.defaultDoc = doc; return b }

// value is a pflag.Value over a field of type T.
type value[T any] struct {
	p      *T
	typ    string
	parse  func(string) (T, error)
	format func(T) string
}

func (v *value[T]) Set(s string) error {
	x, err := v.parse(s)
	if err != nil {
		return err
	}
	*v.p = x
	return nil
}

func (v *value[T]) String() string { return v.format(*v.p) }
func (v *value[T]) Type() string   { return v.typ }

func bind[T any](p *T, name, typ, help string, parse func(string) (T, error), format func(T) string) binding {
	return binding{name: name, help: help, value: &value[T]{p: p, typ: typ, parse: parse, format: format}, target: p}
}

func stringFlag(p *string, name, help string) binding {
	return bind(p, name, "string", help, func(s string) (string, error) { return s, nil }, func(s string) string { return s })
}

func boolFlag(p *bool, name, help string) binding {
	return bind(p, name, "bool", help, func(s string) (bool, error) {
		v, err := strconv.ParseBool(s)
		if err != nil {
			return false, errors.New("want true or false")
		}
		return v, nil
	}, strconv.FormatBool)
}

func durationFlag(p *time.Duration, name, help string) binding {
	return bind(p, name, "duration", help, func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, errors.New("want a duration such as 250ms, 5s or 1m30s")
		}
		return d, nil
	}, time.Duration.String)
}

// intFlag and int64Flag parse as pflag does (base prefixes allowed).
func intFlag(p *int, name, help string) binding {
	return bind(p, name, "int", help, func(s string) (int, error) {
		n, err := strconv.ParseInt(s, 0, strconv.IntSize)
		return int(n), numError(err)
	}, strconv.Itoa)
}

func int64Flag(p *int64, name, help string) binding {
	return bind(p, name, "int64", help, func(s string) (int64, error) {
		n, err := strconv.ParseInt(s, 0, 64)
		return n, numError(err)
	}, func(n int64) string { return strconv.FormatInt(n, 10) })
}

// numError says what a number flag wants, without strconv's repetition
// of the input, which the flag's error already quotes.
func numError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, strconv.ErrRange):
		return errors.New("out of range")
	}
	return errors.New("want a whole number")
}

// sizeFlag binds a byte count, written as a size (see byteSize).
func sizeFlag(p *int64, name, help string) binding {
	return bind(p, name, "size", help, parseSize, func(n int64) string { b := byteSize(n); return b.String() })
}

// fileFlag binds the path of a file read at start: empty, or a regular
// file (symlinks followed, as Kubernetes mounts them), checked before
// anything starts so that a wrong path is a usage error.
func fileFlag(p *string, name, help string) binding {
	b := bind(p, name, "string", help, func(s string) (string, error) {
		if s == "" {
			return s, nil
		}
		if _, err := fileread.Stat(s); err != nil {
			return "", err
		}
		return s, nil
	}, func(s string) string { return s })
	b.file = true
	return b
}

// textFlag binds a field whose type parses itself (UnmarshalText) and
// prints its flag spelling (String); list its values with completes.
func textFlag[T fmt.Stringer, P interface {
	*T
	encoding.TextUnmarshaler
}](p P, name, help string) binding {
	return bind((*T)(p), name, "", help, func(s string) (T, error) {
		var x T
		err := P(&x).UnmarshalText([]byte(s))
		return x, err
	}, T.String)
}

// enumFlag binds a string that takes one of values, in any case; the
// field gets the value's canonical spelling. also, when set, accepts
// other spellings as they are (slog's "warn+2").
func enumFlag(p *string, name, help string, values []string, also func(string) bool) binding {
	b := bind(p, name, "string", help, func(s string) (string, error) {
		for _, v := range values {
			if strings.EqualFold(strings.TrimSpace(s), v) {
				return v, nil
			}
		}
		if also != nil && also(s) {
			return s, nil
		}
		return "", fmt.Errorf("want %s%s", orList(values), didYouMean(s, values))
	}, func(s string) string { return s })
	b.values = values
	return b
}

// urlFlag binds an http:// or https:// URL; empty is allowed when
// optional (the flag then turns something off).
func urlFlag(p *string, name, help string, optional bool) binding {
	return bind(p, name, "string", help, func(s string) (string, error) {
		if s == "" && optional {
			return s, nil
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
			hint := ""
			if !strings.Contains(s, "://") && s != "" {
				hint = fmt.Sprintf(" (did you mean http://%s?)", s)
			}
			return "", fmt.Errorf("want an http:// or https:// URL such as http://127.0.0.1:8000%s", hint)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return "", errors.New("want a URL without a query or fragment")
		}
		return s, nil
	}, func(s string) string { return s })
}

// addrFlag binds a listen address, checked before anything listens: a
// typo is a usage error, not a failure to bind. unix allows a Unix domain
// socket (bridge.Listen's unix:///path); optional allows empty, which
// turns the server off.
func addrFlag(p *string, name, help string, unix, optional bool) binding {
	return bind(p, name, "string", help, func(s string) (string, error) {
		if s == "" && optional {
			return s, nil
		}
		if unix {
			network, _, err := bridge.SplitAddr(s)
			if err != nil {
				return "", err
			}
			if network == "unix" {
				return s, nil
			}
		}
		host, port, err := net.SplitHostPort(s)
		if err == nil && port == "" {
			err = errors.New("no port")
		}
		if err == nil {
			_, err = net.LookupPort("tcp", port)
		}
		if err != nil || strings.ContainsAny(host, "/ ") {
			want := "want host:port, such as 127.0.0.1:8501 or :8501"
			if unix {
				want += ", or unix:///path/to.sock"
			}
			return "", errors.New(want)
		}
		return s, nil
	}, func(s string) string { return s })
}

// orList writes values as "a, b or c".
func orList(values []string) string {
	if len(values) < 2 {
		return strings.Join(values, "")
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}

// envPrefix prefixes every flag's environment variable.
const envPrefix = "TFSBRIDGE_"

// envAnnotation holds the environment variable of a flag.
const envAnnotation = "tfsbridge-env"

// envName is a flag's variable: TFSBRIDGE_<FLAG> (--grpc-addr ↔
// TFSBRIDGE_GRPC_ADDR) where the flag means the same on every command that
// has it, so the deploy manifests' variables keep working;
// TFSBRIDGE_<COMMAND>_<FLAG> where its meaning or default is the
// command's own, so that a variable set for "proxy" never moves a demo.
func envName(command string, b binding) string {
	if b.own {
		return envPrefix + snake(command) + "_" + snake(b.name)
	}
	return envPrefix + snake(b.name)
}

func snake(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

// flagEnv returns the environment variable a registered flag is read from.
func flagEnv(fl *pflag.Flag) string {
	if v := fl.Annotations[envAnnotation]; len(v) == 1 {
		return v[0]
	}
	return ""
}

// register adds c's flags from its bindings: each flag's default is its
// field's value now, its help shows its variable, and an enum's values
// complete in the shell.
func register(c *cobra.Command, bs []binding) {
	fs := c.Flags()
	for _, b := range bs {
		env := envName(c.Name(), b)
		fl := fs.VarPF(b.value, b.name, "", b.help+" [env "+env+"]")
		if b.value.Type() == "bool" {
			fl.NoOptDefVal = "true"
		}
		fl.Annotations = map[string][]string{envAnnotation: {env}}
		if b.defaultDoc != "" {
			fl.Annotations[defaultDocAnnotation] = []string{b.defaultDoc}
		}
		values := b.values
		completion := cobra.NoFileCompletions
		if len(values) > 0 {
			completion = cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)
		}
		if b.file {
			completion = nil // file names: the shell's default
		}
		if completion != nil {
			if err := c.RegisterFlagCompletionFunc(b.name, completion); err != nil {
				panic(err) // a flag registered twice: a programming error
			}
		}
	}
}

// rawHelp is a flag's help without the variable register appended.
func rawHelp(fl *pflag.Flag) string {
	h, _ := strings.CutSuffix(fl.Usage, " [env "+flagEnv(fl)+"]")
	return h
}

// fieldKey identifies a field by its address and type: a struct and its
// first field share an address.
type fieldKey struct {
	addr uintptr
	typ  reflect.Type
}

// fieldFlags maps the path of each field of *opts that a binding sets
// ("MaxBodyBytes", "Proxy.ReadTimeout", as bridge.FieldError names them)
// to its flag.
func fieldFlags(opts *bridge.Options, bs []binding) map[string]string {
	paths := map[fieldKey]string{}
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			fv := v.Field(i)
			paths[fieldKey{fv.Addr().Pointer(), f.Type}] = prefix + f.Name
			if f.Type.Kind() == reflect.Struct {
				walk(fv, prefix+f.Name+".")
			}
		}
	}
	walk(reflect.ValueOf(opts).Elem(), "")
	out := map[string]string{}
	for _, b := range bs {
		t := reflect.ValueOf(b.target)
		if path, ok := paths[fieldKey{t.Pointer(), t.Type().Elem()}]; ok {
			out[path] = b.name
		}
	}
	return out
}

// flagProblem is an invalid value found once every flag is set: a
// combination, a file, a bridge.Options check.
type flagProblem struct {
	flag    string
	problem string
}

func (p *flagProblem) Error() string { return "--" + p.flag + " " + p.problem }
