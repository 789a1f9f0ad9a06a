package webui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var staticFS embed.FS

// asset is one embedded file under its checksummed name.
type asset struct {
	body        []byte
	contentType string
}

// assets are the embedded static files, each served under a name with
// the first 12 hex digits of its SHA-256 in it ("console.3f2a….css"), so a
// browser may keep it a year: a changed file has a new name.
type assets struct {
	byName  map[string]*asset // checksummed name → file
	hashed  map[string]string // plain name → checksummed name
	version string
}

func loadAssets() (*assets, error) {
	as := &assets{byName: map[string]*asset{}, hashed: map[string]string{}}
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		name := path.Base(p)
		ext := path.Ext(name)
		hashed := strings.TrimSuffix(name, ext) + "." + hex.EncodeToString(sum[:6]) + ext
		ct := mime.TypeByExtension(ext)
		if ct == "" {
			ct = "application/octet-stream"
		}
		as.byName[hashed] = &asset{body: b, contentType: ct}
		as.hashed[name] = hashed
		return nil
	})
	return as, err
}

// url is the path of an embedded file under its checksummed name.
func (as *assets) url(name string) (string, error) {
	h, ok := as.hashed[name]
	if !ok {
		return "", fmt.Errorf("no asset %q", name)
	}
	return Prefix + "/static/" + h, nil
}

func (as *assets) serve(w http.ResponseWriter, r *http.Request) {
	a, ok := as.byName[r.PathValue("name")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	_, _ = w.Write(a.body)
}
