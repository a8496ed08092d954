package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// envPrefix prefixes the environment variable of every flag:
// --grpc-addr ↔ TFSBRIDGE_GRPC_ADDR.
const envPrefix = "TFSBRIDGE_"

// lookupEnv is os.LookupEnv's shape, injectable for tests.
type lookupEnv func(key string) (string, bool)

// flagSet is a flag.FlagSet whose every flag can also be set from the
// environment. Precedence: command line, then environment, then default.
type flagSet struct {
	fs      *flag.FlagSet
	command string
	summary string
}

func newFlagSet(command, summary string, out io.Writer) *flagSet {
	f := &flagSet{fs: flag.NewFlagSet(command, flag.ContinueOnError), command: command, summary: summary}
	f.fs.SetOutput(out)
	f.fs.Usage = f.usage
	return f
}

// envName returns the environment variable for a flag name.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// parse applies the environment, then the command line. It returns
// flag.ErrHelp after printing the usage for -h/--help.
func (f *flagSet) parse(args []string, env lookupEnv) error {
	var errs []error
	f.fs.VisitAll(func(fl *flag.Flag) {
		name := envName(fl.Name)
		if v, ok := env(name); ok {
			if err := f.fs.Set(fl.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("environment %s=%q: %w", name, v, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", f.command, f.fs.Arg(0))
	}
	return nil
}

// usage prints every flag with its environment variable and default.
func (f *flagSet) usage() {
	w := f.fs.Output()
	fmt.Fprintf(w, "Usage: tfsbridge %s [flags]\n\n%s\n\nFlags (each also read from the environment variable shown; the command line wins):\n", f.command, f.summary)
	var all []*flag.Flag
	f.fs.VisitAll(func(fl *flag.Flag) { all = append(all, fl) })
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	for _, fl := range all {
		typ, help := flag.UnquoteUsage(fl)
		fmt.Fprintf(w, "  --%s %s\n", fl.Name, typ)
		fmt.Fprintf(w, "        %s\n", help)
		def := fl.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(w, "        env %s, default %s\n", envName(fl.Name), def)
	}
}

// byteSize is a flag value for sizes: a plain byte count or a number with
// a unit (KiB, MiB, GiB; KB, MB, GB), e.g. "64MiB".
type byteSize int64

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9},
	{"b", 1},
}

// Set implements flag.Value.
func (b *byteSize) Set(s string) error {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return fmt.Errorf("invalid size %q: want a positive byte count such as 1048576 or 64MiB", s)
	}
	*b = byteSize(n * mult)
	return nil
}

// String implements flag.Value, in the largest exact binary unit.
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
