package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
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

// byteSize is a flag value for sizes, parsed as a Kubernetes quantity
// (resource.ParseQuantity: 67108864, 64Mi, 64M, 1.5Gi), so the numbers our
// deploy files write for Kubernetes mean the same here. Byte-unit
// spellings are accepted too, in any case (64MiB, 64mib, 5MB, 100B): the
// unit of our earlier releases and of most tools. Whether 0 is allowed is
// the option's business, not the parser's.
type byteSize int64

// maxSize bounds a size well below int64's overflow once multiplied by the
// admission's amplification factors.
const maxSize = 1 << 52

// byteUnits maps a byte unit, lower case, to its quantity suffix.
var byteUnits = []struct{ unit, suffix string }{
	{"kib", "Ki"}, {"mib", "Mi"}, {"gib", "Gi"}, {"tib", "Ti"}, {"pib", "Pi"}, {"eib", "Ei"},
	{"kb", "k"}, {"mb", "M"}, {"gb", "G"}, {"tb", "T"}, {"pb", "P"}, {"eb", "E"},
	{"b", ""},
}

// quantityShape is a non-negative quantity with a short exponent.
var quantityShape = regexp.MustCompile(`^([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]{1,2})?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$`)

// parseSize parses a size: a quantity, or a number with a byte unit
// rewritten as the quantity suffix it means (64MiB → 64Mi). A quantity
// that is not a whole number of bytes (1m is a milli-byte, 0.5) is refused.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	lower := strings.ToLower(t)
	for _, u := range byteUnits {
		num, ok := strings.CutSuffix(lower, u.unit)
		if ok && num != "" && strings.IndexByte("0123456789.", num[len(num)-1]) >= 0 {
			t = t[:len(num)] + u.suffix
			break
		}
	}
	// The shape check first: ParseQuantity takes any exponent, and one like
	// 1e1000000000 keeps its decimal arithmetic busy for minutes.
	if !quantityShape.MatchString(t) {
		return 0, fmt.Errorf("invalid size %q: want a byte count such as 67108864, 64Mi or 64MiB", s)
	}
	q, err := resource.ParseQuantity(t)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: want a byte count such as 67108864, 64Mi or 64MiB", s)
	}
	// Value rounds up, so it equals the quantity only for a whole number
	// of bytes; ParseQuantity caps what overflows, hence the bound.
	n := q.Value()
	if n < 0 || n > maxSize || q.Cmp(*resource.NewQuantity(n, resource.BinarySI)) != 0 {
		return 0, fmt.Errorf("invalid size %q: want a whole number of bytes from 0 to %d", s, int64(maxSize))
	}
	return n, nil
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
