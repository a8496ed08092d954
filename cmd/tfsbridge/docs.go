package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// servingCommands are the commands README's Configuration table lists,
// in its order.
var servingCommands = []string{"extproc", "proxy", "mock", "demo"}

// docsCommand is "tfsbridge docs config", which prints README's
// Configuration table from the command tree. Hidden: it is for whoever
// edits the README (TestReadmeConfiguration -update writes it in place).
func docsCommand() *cobra.Command {
	docs := &cobra.Command{
		Use:    "docs config",
		Short:  "Print README's Configuration table, generated from the flags",
		Hidden: true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 || args[0] != "config" {
				return errors.New(`docs: want "docs config"`)
			}
			return nil
		},
		RunE: func(c *cobra.Command, _ []string) error {
			table, err := configTable(c.Root(), servingCommands)
			if err != nil {
				return err
			}
			_, err = io.WriteString(c.OutOrStdout(), table)
			return err
		},
	}
	return docs
}

// tableRow is one variable of README's Configuration table.
type tableRow struct {
	flag, env, def, help string
	commands             []string
}

// configTable renders README's Configuration table: one row per
// environment variable, in the order the serving commands register their
// flags, with the commands that read it. A variable read by two commands
// must mean the same on both (same flag, help and default): otherwise
// one of them needs commandEnv, and configTable fails.
func configTable(root *cobra.Command, commands []string) (string, error) {
	var rows []*tableRow
	byEnv := map[string]*tableRow{}
	var errs []error
	for _, name := range commands {
		c, _, err := root.Find([]string{name})
		if err != nil || c.Name() != name {
			return "", fmt.Errorf("no %q command", name)
		}
		fs := c.Flags()
		sorted := fs.SortFlags
		fs.SortFlags = false // registration order: related flags together
		fs.VisitAll(func(fl *pflag.Flag) {
			env := flagEnv(fl)
			if env == "" {
				return // --help
			}
			r := &tableRow{flag: fl.Name, env: env, def: defaultCell(fl), help: rawHelp(fl)}
			if prev := byEnv[env]; prev != nil {
				if prev.flag != r.flag || prev.def != r.def || prev.help != r.help {
					errs = append(errs, fmt.Errorf("%s is read by --%s of %v and --%s of %s, which differ in meaning or default: give one a command-prefixed variable (commandEnv)",
						env, prev.flag, prev.commands, fl.Name, name))
				}
				prev.commands = append(prev.commands, name)
				return
			}
			r.commands = []string{name}
			byEnv[env] = r
			rows = append(rows, r)
		})
		fs.SortFlags = sorted
	}
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	var b strings.Builder
	b.WriteString("| Flag | Env | Default | Commands | Meaning |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | %s | %s |\n", r.flag, r.env, r.def, strings.Join(r.commands, ", "), cell(r.help))
	}
	fmt.Fprintf(&b, "| `OTEL_*` | (standard) | tracing off | %s | %s |\n", strings.Join(commands, ", "), otelHelp)
	return b.String(), nil
}

// otelHelp is the table's last row: the variables OpenTelemetry's
// standard names, which no flag sets.
const otelHelp = "OpenTelemetry tracing, on when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (see Observability)"

// defaultDocAnnotation holds a binding's defaultDoc.
const defaultDocAnnotation = "tfsbridge-default-doc"

// defaultCell is a flag's default as README shows it: in backquotes, in
// words when it is computed at start, "none" when empty.
func defaultCell(fl *pflag.Flag) string {
	if doc := fl.Annotations[defaultDocAnnotation]; len(doc) == 1 {
		return doc[0]
	}
	if fl.DefValue == "" {
		return "none"
	}
	return "`" + fl.DefValue + "`"
}

// cell makes help text safe in a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

// readmeTableBegin and readmeTableEnd delimit the generated table in
// README.md.
const (
	readmeTableBegin = "<!-- Generated from the flags by \"go run ./cmd/tfsbridge docs config\" (or \"go test ./cmd/tfsbridge -run TestReadmeConfiguration -update\"); edit the flags' help, not this table. -->\n"
	readmeTableEnd   = "<!-- End of the generated table. -->\n"
)

// spliceTable replaces the generated table between the markers of doc.
func spliceTable(doc, table string) (string, error) {
	before, rest, ok := strings.Cut(doc, readmeTableBegin)
	if !ok {
		return "", errors.New("README has no generated-table marker")
	}
	_, after, ok := strings.Cut(rest, readmeTableEnd)
	if !ok {
		return "", errors.New("README's generated table has no end marker")
	}
	return before + readmeTableBegin + table + readmeTableEnd + after, nil
}
