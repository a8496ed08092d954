package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// environment is the process environment, injectable for tests.
type environment interface {
	LookupEnv(key string) (string, bool)
	// Names lists the variables set, in any order.
	Names() []string
}

// osEnv is the process's own environment.
type osEnv struct{}

func (osEnv) LookupEnv(key string) (string, bool) { return os.LookupEnv(key) }

func (osEnv) Names() []string {
	var names []string
	for _, kv := range os.Environ() {
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" {
			names = append(names, k)
		}
	}
	return names
}

// fromEnv records which flags the environment set: flag name →
// NAME="value", as a message quotes it.
type fromEnv map[string]string

// applyEnv sets every flag the command line left alone from its
// environment variable: the command line wins over the environment, the
// environment over the default. A bad value is a usage error naming the
// variable.
func applyEnv(fs *pflag.FlagSet, env environment) (fromEnv, error) {
	set := fromEnv{}
	var errs []error
	fs.VisitAll(func(fl *pflag.Flag) {
		name := flagEnv(fl)
		if fl.Changed || name == "" {
			return
		}
		if v, ok := env.LookupEnv(name); ok {
			// Value.Set, not fs.Set: the command line's "Changed" stays
			// the command line's, and the error is not wrapped twice.
			if err := fl.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("environment %s=%q (--%s): %w", name, v, fl.Name, err))
				return
			}
			set[fl.Name] = fmt.Sprintf("%s=%q", name, v)
		}
	})
	return set, errors.Join(errs...)
}

// describe rewrites a flagProblem to name what the user wrote: the flag,
// or the variable and its value when the environment set it.
func (set fromEnv) describe(err error) error {
	var p *flagProblem
	if !errors.As(err, &p) {
		return err
	}
	if v, ok := set[p.flag]; ok {
		return fmt.Errorf("environment %s (--%s) %s", v, p.flag, p.problem)
	}
	return p
}

// envIndex maps each variable of the serving commands to the commands
// that read it.
func envIndex(root *cobra.Command) map[string][]string {
	idx := map[string][]string{}
	for _, c := range root.Commands() {
		c.Flags().VisitAll(func(fl *pflag.Flag) {
			if name := flagEnv(fl); name != "" && !slices.Contains(idx[name], c.Name()) {
				idx[name] = append(idx[name], c.Name())
			}
		})
	}
	return idx
}

// warnUnknownEnv names, on w, each TFSBRIDGE_ variable that command c does
// not read: a typo (with the closest variable it reads, if any is close)
// or another command's variable. It warns rather than fails: a variable
// meant for a newer release must not stop an older one.
func warnUnknownEnv(w io.Writer, c *cobra.Command, env environment) {
	idx := envIndex(c.Root())
	var own []string
	c.Flags().VisitAll(func(fl *pflag.Flag) {
		if name := flagEnv(fl); name != "" {
			own = append(own, name)
		}
	})
	names := env.Names()
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		if !strings.HasPrefix(name, envPrefix) || slices.Contains(own, name) || serviceLink(name) {
			continue
		}
		if cmds, ok := idx[name]; ok {
			fmt.Fprintf(w, "%s: warning: environment %s is read by \"tfsbridge %s\", not by this command; ignored\n",
				c.CommandPath(), name, strings.Join(cmds, "\", \"tfsbridge "))
			continue
		}
		fmt.Fprintf(w, "%s: warning: environment %s is not a tfsbridge variable; ignored%s\n", c.CommandPath(), name, didYouMean(name, own))
	}
}

// serviceLink tells a variable Kubernetes sets for a Service named
// tfsbridge (TFSBRIDGE_SERVICE_HOST, TFSBRIDGE_PORT_9002_TCP, ...) when
// enableServiceLinks is on: not the user's, and no typo.
func serviceLink(name string) bool {
	return strings.HasPrefix(name, envPrefix+"SERVICE_") || name == envPrefix+"PORT" || strings.HasPrefix(name, envPrefix+"PORT_")
}

// didYouMean returns " (did you mean X?)" for the candidate closest to s
// when it is close enough to be a typo of it, else "".
func didYouMean(s string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	// A typo changes a few letters, never most of a short word.
	if bestD < 0 || bestD > 3 || 2*bestD >= len(strings.TrimPrefix(best, envPrefix)) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
