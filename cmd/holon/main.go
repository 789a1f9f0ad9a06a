// Command holon is the Holon gateway: one binary that serves the gateway,
// validates manifests and mandates, and operates the appliance.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // budget windows name IANA time zones: the same on every host, with or without tzdata

	"holon.dev/holon/appliance"
)

// Version is the gateway's version, set at build time with
// -ldflags "-X main.Version=...".
var Version = "0.1.0-dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		appliance.TuneCollector(os.Getenv) // holon bench tunes its own process the same way
	}
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	os.Exit(m.Run(ctx, os.Args[1:]))
}

// Main wires the subcommands to the process's streams and environment.
type Main struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// command is one subcommand: its own flags, usage and run.
type command interface {
	Name() string
	Synopsis() string
	Run(ctx context.Context, args []string) error
}

// errUsage makes Run print the usage and exit 2.
var errUsage = errors.New("usage")

// exitError carries an exit code without another message (validate's
// verdicts are already printed).
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit %d", int(e)) }

func (m *Main) commands() []command {
	return []command{
		&serveCommand{stderr: m.Stderr, getenv: m.Getenv},
		&validateCommand{stdout: m.Stdout, stderr: m.Stderr},
		&versionCommand{stdout: m.Stdout, stderr: m.Stderr},
		&backupCommand{stdout: m.Stdout, stderr: m.Stderr, getenv: m.Getenv},
		&restoreCommand{stdin: m.Stdin, stdout: m.Stdout, stderr: m.Stderr},
		&verifyCommand{stdin: m.Stdin, stdout: m.Stdout, stderr: m.Stderr},
		&agentsCommand{stdout: m.Stdout, stderr: m.Stderr, getenv: m.Getenv},
		&benchCommand{stdout: m.Stdout, stderr: m.Stderr},
		&publishCommand{stdout: m.Stdout, stderr: m.Stderr, getenv: m.Getenv},
		&credentialCommand{stdin: m.Stdin, stdout: m.Stdout, stderr: m.Stderr, getenv: m.Getenv},
		&earningsCommand{stdout: m.Stdout, stderr: m.Stderr, getenv: m.Getenv},
		&drillCommand{stdout: m.Stdout, stderr: m.Stderr, getenv: m.Getenv},
	}
}

// Run runs the subcommand named by args[0] and returns the exit code: 0 on
// success, 1 on failure, 2 on a usage error.
func (m *Main) Run(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		m.usage()
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range m.commands() {
		if c.Name() != args[0] {
			continue
		}
		err := c.Run(ctx, args[1:])
		var code exitError
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		case errors.As(err, &code):
			return int(code)
		default:
			fmt.Fprintf(m.Stderr, "holon %s: %v\n", args[0], err)
			return 1
		}
	}
	fmt.Fprintf(m.Stderr, "holon: unknown command %q\n\n", args[0])
	m.usage()
	return 2
}

func (m *Main) usage() {
	fmt.Fprintln(m.Stderr, "Holon: a gateway for AI agents that pay other agents.")
	fmt.Fprintln(m.Stderr)
	fmt.Fprintln(m.Stderr, "Usage: holon <command> [flags]")
	fmt.Fprintln(m.Stderr)
	for _, c := range m.commands() {
		fmt.Fprintf(m.Stderr, "  %-10s %s\n", c.Name(), c.Synopsis())
	}
	fmt.Fprintln(m.Stderr)
	fmt.Fprintln(m.Stderr, "Run 'holon <command> -h' for a command's flags.")
}

type versionCommand struct{ stdout, stderr io.Writer }

func (c *versionCommand) Name() string     { return "version" }
func (c *versionCommand) Synopsis() string { return "print the gateway's version" }
func (c *versionCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprintln(c.stderr, "Usage: holon version\n\nPrints the gateway's version.")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return errUsage
	}
	fmt.Fprintf(c.stdout, "holon %s\n", Version)
	return nil
}
