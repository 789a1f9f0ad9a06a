package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
)

// validateCommand checks manifests and mandates against every rule of the
// spec and prints each error with its field path.
type validateCommand struct {
	stdout, stderr io.Writer
}

func (c *validateCommand) Name() string { return "validate" }
func (c *validateCommand) Synopsis() string {
	return "check holon.yaml manifests and mandate files"
}

func (c *validateCommand) usage(fs *flag.FlagSet) func() {
	return func() {
		fmt.Fprintln(c.stderr, `Usage: holon validate [-registry dir]... <holon.yaml|mandate.yaml>...

Checks each manifest (holon.yaml, or the same document as JSON) and each
mandate against every rule of the specification, and prints one line per
problem as "file: field.path: message". A manifest's lineage.fork_of must
name a version among the manifests given or found under -registry.
Exits 0 when every document is valid, 1 otherwise.

Flags:`)
		fs.PrintDefaults()
	}
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func (c *validateCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	var registries stringList
	fs.Var(&registries, "registry", "a directory of manifests (*.yaml, *.yml, *.json) that fork_of may name; repeatable")
	fs.Usage = c.usage(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errUsage
	}

	type result struct {
		file     string
		manifest *contract.Manifest
		mandate  *contract.Mandate
		err      error
	}
	listed := map[string]*contract.Manifest{}
	for _, dir := range registries {
		files, err := manifestFiles(dir)
		if err != nil {
			return err
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if kind, _ := contract.DocumentKind(b); err != nil || kind != contract.KindManifest {
				continue
			}
			if m, err := contract.ParseManifest(b); err == nil {
				listed[m.Ref()] = m
			}
		}
	}
	var results []result
	for _, file := range fs.Args() {
		r := result{file: file}
		b, err := os.ReadFile(file)
		kind := ""
		if err == nil {
			kind, err = contract.DocumentKind(b)
		}
		switch {
		case err != nil:
			r.err = err
		case kind == contract.KindManifest:
			r.manifest, r.err = contract.ParseManifest(b)
			if r.err == nil {
				listed[r.manifest.Ref()] = r.manifest
			}
		default:
			r.mandate, r.err = contract.ParseMandate(b)
		}
		results = append(results, r)
	}
	lookup := func(ref string) (*contract.Manifest, bool) { m, ok := listed[ref]; return m, ok }

	failed := 0
	for _, r := range results {
		if r.err == nil && r.manifest != nil {
			_, r.err = r.manifest.CheckLineage(lookup)
		}
		if r.err == nil {
			what := ""
			if r.mandate != nil {
				what = "mandate " + r.mandate.ID
			} else {
				what = "manifest " + r.manifest.Ref()
			}
			fmt.Fprintf(c.stdout, "%s: ok (%s)\n", r.file, what)
			continue
		}
		failed++
		var ge *holon.Error
		if errors.As(r.err, &ge) && len(ge.Fields) > 0 {
			for _, f := range ge.Fields {
				fmt.Fprintf(c.stdout, "%s: %s\n", r.file, f.Error())
			}
			continue
		}
		fmt.Fprintf(c.stdout, "%s: %v\n", r.file, r.err)
	}
	if failed > 0 {
		fmt.Fprintf(c.stdout, "%d of %d documents invalid\n", failed, len(results))
		return exitError(1)
	}
	return nil
}

// manifestFiles lists the documents under dir, recursively.
func manifestFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml", ".json":
			files = append(files, path)
		}
		return nil
	})
	return files, err
}
