package appliance_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"holon.dev/holon/appliance"
	"holon.dev/holon/bench/drill/lossyfs/lossyfstest"
)

// Ensure that an upload answered 201 survives a power cut right after it:
// its record and its bytes, in a blob directory the upload created (a new
// directory's name is durable only once its parent is synced).
func TestFiles_UploadSurvivesPowerCut(t *testing.T) {
	f := lossyfstest.Mount(t)
	fa := newFilesApp(t, func(c *appliance.Config) {
		c.DB = filepath.Join(f.Dir(), "data", "holon.db")
		c.NoSync = false
	})
	ann := fa.signup("ann")
	body := []byte("bytes that must outlive the power")
	status, out := ann.human.upload("text/plain", body)
	if status != http.StatusCreated {
		t.Fatalf("upload: %d %v", status, out)
	}
	fa.shutdown(true)
	if err := f.Cut(nil); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	sha := hex.EncodeToString(sum[:])
	got, err := os.ReadFile(filepath.Join(f.Dir(), "data", "holon.db.files", "blobs", sha[:2], sha))
	if err != nil || string(got) != string(body) {
		t.Fatalf("after a power cut the bytes of an upload answered 201 read %q, %v", got, err)
	}
	fa.open()
	status, list := ann.human.do("GET", "/v0/files", nil)
	files, _ := list["files"].([]any)
	if status != http.StatusOK || len(files) != 1 {
		t.Fatalf("after a power cut GET /v0/files: %d %v, want the one upload", status, list)
	}
}
