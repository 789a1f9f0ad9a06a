package main

import (
	"context"
	"strings"
	"testing"
)

// Ensure that every subcommand answers -h with its usage on stderr and
// exit 0, and that holon's own usage lists the commands an operator needs
// (earnings waits for its endpoint).
func TestCLI_EveryCommandHasUsage(t *testing.T) {
	m := &Main{Getenv: func(string) string { return "" }}
	var names []string
	for _, c := range m.commands() {
		names = append(names, c.Name())
	}
	for _, want := range []string{"serve", "agents", "validate", "backup", "restore", "verify", "version", "publish", "credential"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("no %s command among %v", want, names)
		}
	}
	for _, name := range names {
		var stdout, stderr lockedBuffer
		m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
		code := m.Run(context.Background(), []string{name, "-h"})
		if code != 0 || !strings.Contains(stderr.String(), "Usage: holon "+name) {
			t.Errorf("holon %s -h: exit %d, stderr %q; want 0 and its usage", name, code, stderr.String())
		}
	}
	var stderr lockedBuffer
	m = &Main{Stdout: &lockedBuffer{}, Stderr: &stderr, Getenv: func(string) string { return "" }}
	if code := m.Run(context.Background(), []string{"-h"}); code != 0 {
		t.Errorf("holon -h: exit %d", code)
	}
	for _, name := range names {
		if !strings.Contains(stderr.String(), "  "+name+" ") {
			t.Errorf("holon -h does not list %s:\n%s", name, stderr.String())
		}
	}
}
