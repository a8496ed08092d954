package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
)

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
