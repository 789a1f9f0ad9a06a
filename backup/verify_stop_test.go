package backup_test

import (
	"context"
	"errors"
	"testing"

	"holon.dev/holon/backup"
)

// Ensure that verify stops at once, with the context's error, when its
// context ends (holon verify on SIGTERM), instead of scanning on.
func TestVerifyContext_StopsWhenCancelled(t *testing.T) {
	s := openStore(t, "")
	fixture(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := backup.VerifyContext(ctx, s)
	if !errors.Is(err, context.Canceled) || rep != nil {
		t.Fatalf("verify with its context ended: %v, %v; want context.Canceled and no report", rep, err)
	}
	if _, err := backup.VerifyContext(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}
