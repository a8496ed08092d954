package main

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// envPrefix prefixes every flag's environment variable.
const envPrefix = "TFSBRIDGE_"

// envAnnotation holds a flag's environment variable when it is not the
// shared TFSBRIDGE_<FLAG>; see commandEnv.
const envAnnotation = "tfsbridge-env"

// lookupEnv is os.LookupEnv's shape, injectable for tests.
type lookupEnv func(key string) (string, bool)

// envName is the shared variable of a flag: --grpc-addr ↔ TFSBRIDGE_GRPC_ADDR.
// It is used by every command on which the flag means the same thing
// (same help, same default), so the deploy manifests' variables keep working.
func envName(flag string) string {
	return envPrefix + snake(flag)
}

func snake(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

// commandEnv gives the named flags of one command a command-prefixed
// variable, TFSBRIDGE_<COMMAND>_<FLAG>: for flags whose meaning or default
// differs from the production commands' (the mock's and the demo's
// --http-addr), so that a variable set for "proxy" never moves a demo.
func commandEnv(fs *pflag.FlagSet, command string, names ...string) {
	for _, n := range names {
		if err := fs.SetAnnotation(n, envAnnotation, []string{envPrefix + snake(command) + "_" + snake(n)}); err != nil {
			panic(err) // a typo in a flag name: a programming error
		}
	}
}

// flagEnv returns the environment variable a flag is read from.
func flagEnv(fl *pflag.Flag) string {
	if v := fl.Annotations[envAnnotation]; len(v) == 1 {
		return v[0]
	}
	return envName(fl.Name)
}

// showEnv appends each flag's variable to its help text.
func showEnv(fs *pflag.FlagSet) {
	fs.VisitAll(func(fl *pflag.Flag) { fl.Usage += " [env " + flagEnv(fl) + "]" })
}

// applyEnv sets every flag the command line left alone from its
// environment variable: the command line wins over the environment, the
// environment over the default.
func applyEnv(fs *pflag.FlagSet, env lookupEnv) error {
	var errs []error
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Changed {
			return
		}
		name := flagEnv(fl)
		if v, ok := env(name); ok {
			// Value.Set, not fs.Set: the command line's "Changed" stays
			// the command line's, and the error is not wrapped twice.
			if err := fl.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("environment %s=%q (--%s): %w", name, v, fl.Name, err))
			}
		}
	})
	return errors.Join(errs...)
}

// longDashArgs rewrites the single-dash long flags the standard flag
// package accepted (-request-timeout=7s) to pflag's --request-timeout=7s,
// so that existing command lines keep working. Only names of fs's flags
// are rewritten, never a flag's value nor anything after "--".
func longDashArgs(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	takesValue := false
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if takesValue { // the value of the previous flag, whatever it looks like
			out, takesValue = append(out, a), false
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		fl := fs.Lookup(name)
		if fl != nil && len(name) > 1 && strings.HasPrefix(a, "-") {
			if !strings.HasPrefix(a, "--") {
				a = "-" + a
			}
			takesValue = !hasValue && fl.NoOptDefVal == ""
		}
		out = append(out, a)
	}
	return out
}

// byteSize is a flag value for sizes: a byte count, or a number with a
// Kubernetes quantity suffix (Ki, Mi, Gi, Ti, Pi, Ei; k, M, G, T, P, E)
// or a byte unit (KiB, MiB, GiB, ...; KB, MB, GB, ...), e.g. 64Mi, 64MiB or
// 67108864. Whether 0 is allowed is the option's business, not the parser's.
type byteSize int64

// maxSize bounds a size well below int64's overflow once multiplied by the
// admission's amplification factors.
const maxSize = 1 << 52

var sizeSuffixes = []struct {
	suffix string
	mult   int64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50}, {"Ei", 1 << 60},
	{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18},
}

// parseSize parses a size as a Kubernetes quantity would, plus the
// "B"-suffixed spellings; any letter case is accepted but for a lone m,
// which a quantity reads as milli.
func parseSize(s string) (int64, error) {
	bad := fmt.Errorf("invalid size %q: want a byte count such as 67108864, 64Mi or 64MiB", s)
	t := strings.TrimSpace(s)
	num, mult := t, int64(1)
	if u := strings.TrimSuffix(strings.TrimSuffix(t, "B"), "b"); u != t {
		num = u // a trailing B: bytes, or the byte unit of a suffix
	}
	for _, sf := range sizeSuffixes {
		n, ok := cutSuffixFold(num, sf.suffix)
		if ok && !(sf.suffix == "M" && strings.HasSuffix(num, "m") && num == t) {
			num, mult = n, sf.mult
			break
		}
	}
	if !sizeNumber.MatchString(num) {
		return 0, bad
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, bad
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() || r.Sign() < 0 || r.Cmp(new(big.Rat).SetInt64(maxSize)) > 0 {
		return 0, fmt.Errorf("invalid size %q: want a whole number of bytes from 0 to %d", s, int64(maxSize))
	}
	return r.Num().Int64(), nil
}

// sizeNumber is a quantity's number: decimal, with an optional fraction
// and a short exponent (a long one would make big.Rat compute for ages).
var sizeNumber = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]{1,2})?$`)

func cutSuffixFold(s, suffix string) (string, bool) {
	if len(s) > len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix) {
		return s[:len(s)-len(suffix)], true
	}
	return s, false
}

// Set implements pflag.Value.
func (b *byteSize) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// String implements pflag.Value, in the largest exact binary unit.
func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// Type names the value in usage text.
func (b *byteSize) Type() string { return "size" }
