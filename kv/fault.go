package kv

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// FaultEnv names the test-only fault injection of the store's write path,
// for the drills (holon drill faults) that must make the real binary's
// writes fail: "<kind>:<n>" fails the commit that follows n good ones,
// once. The kinds are the ways a bbolt commit fails:
//
//	commit       the commit returns an error, nothing of the batch written
//	short-write  a page is written in part (torn), then the commit fails
//	fsync        the batch is written but its fsync fails: the callers are
//	             told of an error, while the kernel may keep the pages
//	nosync       (n ignored) a planted bug: the store is opened with
//	             bbolt's NoSync, so no commit is ever fsynced; the
//	             power-loss drill must catch it (a crash cannot)
//
// Unset (always, outside a drill) it costs one nil check per commit.
const FaultEnv = "HOLON_TEST_STORE_FAULT"

// ErrInjected is the error of an injected fault.
var ErrInjected = errors.New("injected store fault (" + FaultEnv + ")")

// faults are the injection points of one store (nil when FaultEnv is unset).
type faults struct {
	kind string
	left atomic.Int64 // good commits before the fault; below 0 once it fired
	path string
}

func faultsFromEnv(path string) (*faults, error) {
	v := os.Getenv(FaultEnv)
	if v == "" {
		return nil, nil
	}
	kind, n, _ := strings.Cut(v, ":")
	after, err := strconv.ParseInt(n, 10, 64)
	if err != nil || after < 0 || (kind != "commit" && kind != "short-write" && kind != "fsync" && kind != "nosync") {
		return nil, fmt.Errorf("%s=%q: want commit|short-write|fsync:<good commits before it>, or nosync:0", FaultEnv, v)
	}
	f := &faults{kind: kind, path: path}
	f.left.Store(after)
	return f, nil
}

// due reports whether this commit is the one to fail (once).
func (f *faults) due() bool { return f != nil && f.kind != "nosync" && f.left.Add(-1) == -1 }

// noSync reports whether the planted bug "nosync" is on.
func (f *faults) noSync() bool { return f != nil && f.kind == "nosync" }

// beforeCommit is called at the end of a batch's transaction, before bbolt
// commits it: an error rolls the whole batch back.
func (f *faults) beforeCommit() error {
	if f == nil || f.kind == "fsync" || !f.due() {
		return nil
	}
	if f.kind == "short-write" {
		// Half a page of junk past the end of the file, where a growing
		// commit writes its new pages: torn, and never referenced.
		file, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		_, werr := file.Write([]byte(strings.Repeat("\xde\xad", os.Getpagesize()/4)))
		file.Close()
		return fmt.Errorf("%w: short write: %v", ErrInjected, werr)
	}
	return fmt.Errorf("%w: commit failed", ErrInjected)
}

// afterCommit is called once bbolt committed a batch: an error is what the
// batch's callers are told, as when the last fsync of a commit fails.
func (f *faults) afterCommit() error {
	if f == nil || f.kind != "fsync" || !f.due() {
		return nil
	}
	return fmt.Errorf("%w: fsync: input/output error", ErrInjected)
}
