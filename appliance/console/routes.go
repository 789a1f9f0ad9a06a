package console

import (
	"net/http"
	"strings"
	"sync"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/files"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/webui"
)

// The console's upload form posts the file as multipart/form-data to
// UploadPath; the page streams the file part into POST /v0/files
// (Backend.Send), whose limits apply as it reads. The request body may
// hold the file and UploadOverhead more: the form's token and the parts'
// headers (MaxUpload, the front door's bound for that path).
const (
	UploadPath     = webui.Prefix + "/files"
	UploadOverhead = 64 << 10
	MaxUpload      = files.MaxFileSize + UploadOverhead
)

// Mount mounts the console at /console, sends browsers asking for "/"
// there, and adds the two API routes only the console needed: the
// mandates of a dev gateway, and the store's health for the operator.
func (b *Backend) Mount(m *auth.Mount) {
	for _, method := range []string{"GET", "HEAD", "POST"} {
		m.Router.Handler(method, webui.Prefix+"/*page", b.console)
	}
	m.Router.GET("/", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		if strings.Contains(r.Header.Get("Accept"), "text/html") {
			http.Redirect(w, r, webui.Prefix+"/", http.StatusSeeOther)
			return
		}
		web.Answer(w, holon.Errorf(holon.CodeNotFound, "no route GET /: the API is under /v0, the console under /console"))
	})
	if !b.cfg.Hosted {
		m.Handle("GET", "/v0/mandates", auth.Anyone, b.devMandates)
	}
	m.Handle("GET", "/v0/admin/health", auth.Operator, b.storeHealth)
	// Built at its first request, not at start-up: converting the
	// embedded YAML is a tenth of the gateway's start-up CPU.
	spec := sync.OnceValues(webui.OpenAPI)
	m.Router.GET(webui.OpenAPIPath, func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		spec, err := spec()
		if err != nil { // an embedded file: a build defect, which the tests catch
			b.fail(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(spec)
	})
}

func (b *Backend) fail(w http.ResponseWriter, r *http.Request, err error) {
	web.Fail(b.cfg.Log, w, r, err)
}
