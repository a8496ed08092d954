package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// servingCommands are the commands whose flags README's Configuration
// table lists, in the table's order.
var servingCommands = []string{"extproc", "proxy", "mock", "demo"}

// envFlag is what one environment variable sets: one flag, with one
// meaning and default, on some commands.
type envFlag struct {
	flag, def, usage string
	commands         []string
}

// flagTree collects every serving command's flags by environment variable.
// Two commands share a variable only when the flag's help and default
// are the same on both; otherwise the test fails (the naming rule).
func flagTree(t *testing.T) map[string]*envFlag {
	t.Helper()
	root, _ := newTree(envOf(nil))
	all := map[string]*envFlag{}
	for _, name := range servingCommands {
		c, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		c.Flags().VisitAll(func(fl *pflag.Flag) {
			env := flagEnv(fl)
			e := all[env]
			if e == nil {
				e = &envFlag{flag: fl.Name, def: fl.DefValue, usage: fl.Usage}
				all[env] = e
			} else if e.flag != fl.Name || e.def != fl.DefValue || e.usage != fl.Usage {
				t.Errorf("%s is read by --%s of %v and --%s of %s, which differ in meaning or default: give one a command-prefixed variable (commandEnv)",
					env, e.flag, e.commands, fl.Name, name)
			}
			e.commands = append(e.commands, name)
		})
	}
	return all
}

// readmeRow is one row of README's Configuration table.
type readmeRow struct {
	flag, env, def string
	commands       []string
}

var readmeCell = regexp.MustCompile("^`(--[a-z0-9-]+)`$")

// readmeTable parses README's Configuration table: one flag and one
// variable per row, the default in backquotes (or words when there is
// none), the commands comma-separated.
func readmeTable(t *testing.T) []readmeRow {
	t.Helper()
	doc, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Configuration\n")
	if !ok {
		t.Fatal("README has no Configuration section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []readmeRow
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		cells := strings.Split(line, " | ")
		if len(cells) < 5 {
			t.Errorf("README row has %d cells: %s", len(cells), line)
			continue
		}
		m := readmeCell.FindStringSubmatch(strings.TrimPrefix(cells[0], "| "))
		if m == nil || !strings.HasPrefix(cells[1], "`TFSBRIDGE_") || strings.Count(cells[1], "`") != 2 {
			t.Errorf("README row: want one `--flag` and one `TFSBRIDGE_…` variable: %s", line)
			continue
		}
		rows = append(rows, readmeRow{flag: strings.TrimPrefix(m[1], "--"), env: strings.Trim(cells[1], "`"),
			def: cells[2], commands: strings.Split(cells[3], ", ")})
	}
	return rows
}

// sameDefault tells whether README's default cell describes fl's default:
// the value in backquotes (durations and sizes compared by value), or
// words when the default is empty or derived at run time.
func sameDefault(cell string, fl *envFlag, derived bool) bool {
	v, quoted := strings.CutPrefix(cell, "`")
	v, _, _ = strings.Cut(v, "`")
	switch {
	case derived || fl.def == "":
		return !quoted
	case !quoted:
		return false
	case v == fl.def:
		return true
	}
	if a, err := time.ParseDuration(v); err == nil {
		b, err := time.ParseDuration(fl.def)
		return err == nil && a == b
	}
	a, errA := parseSize(v)
	b, errB := parseSize(fl.def)
	return errA == nil && errB == nil && a == b
}

// TestReadmeConfiguration holds README's Configuration table and the
// command tree to each other, both ways: every variable of every serving
// command has its row, with its flag, default and commands, and every row
// names a variable a command reads.
func TestReadmeConfiguration(t *testing.T) {
	tree := flagTree(t)
	seen := map[string]bool{}
	for _, r := range readmeTable(t) {
		if seen[r.env] {
			t.Errorf("README lists %s twice", r.env)
		}
		seen[r.env] = true
		fl, ok := tree[r.env]
		if !ok {
			t.Errorf("README lists %s (--%s), which no command reads", r.env, r.flag)
			continue
		}
		if r.flag != fl.flag {
			t.Errorf("README: %s sets --%s; the code: --%s", r.env, r.flag, fl.flag)
		}
		if !slices.Equal(r.commands, fl.commands) {
			t.Errorf("README: --%s (%s) on %v; the code: %v", r.flag, r.env, r.commands, fl.commands)
		}
		if !sameDefault(r.def, fl, derivedDefaults[fl.flag]) {
			t.Errorf("README: --%s (%s) defaults to %s; the code: %q", r.flag, r.env, r.def, fl.def)
		}
	}
	for env, fl := range tree {
		if !seen[env] {
			t.Errorf("README's Configuration table lacks %s (--%s on %v)", env, fl.flag, fl.commands)
		}
	}
}

// derivedDefaults are flags whose default is computed at start; README
// describes it in words.
var derivedDefaults = map[string]bool{"max-inflight-bytes": true}
