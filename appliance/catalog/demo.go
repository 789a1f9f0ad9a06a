package catalog

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"golang.org/x/time/rate"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/ratelimit"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
)

// The public demo's rules (gateway.md §7 "Extra endpoints"): our own cheap
// agents only, a narrowed input, 10 tries per visitor and 600 in all per
// hour, a short run.
const (
	demoMaxInput      = 2 << 10
	demoPerVisitor    = 10
	demoPerHour       = 600
	demoTimeout       = 10 * time.Second
	demoMaxOutput     = 16 << 10
	demoFilePrefix    = "holon://files/"
	demoSampleFiles   = "holon://files/eval/"
	demoAllowedHeader = "Content-Type"
)

// demoMaxWorstCase is the most a demo agent may cost per run (in its own
// currency): only cheap agents are tried for free.
var demoMaxWorstCase = journal.MustParseAmount("0.10")

// demo serves POST /v0/demo/{ns}/{name}: a free try of a shipped agent for
// the public site, through gateway.Engine.Try, so nothing is billed or
// measured.
type demo struct {
	engine *gateway.Engine
	// origin is HOLON_SITE_URL's origin, the only one CORS lets in ("":
	// none).
	origin     string
	trustProxy bool
	visitor    ratelimit.Limiter
	all        *rate.Limiter
	now        func() time.Time
}

func newDemo(e *gateway.Engine, o Options) *demo {
	d := &demo{engine: e, now: o.Now, trustProxy: o.TrustProxy}
	if u, err := url.Parse(o.SiteURL); err == nil && u.Scheme != "" && u.Host != "" {
		d.origin = u.Scheme + "://" + u.Host
	}
	perHour := rate.Every(time.Hour / demoPerVisitor)
	d.visitor = ratelimit.NewSet(ratelimit.Limit{Rate: perHour, Burst: demoPerVisitor}, 0, o.Now)
	d.all = rate.NewLimiter(rate.Every(time.Hour/demoPerHour), demoPerHour)
	return d
}

// demoBody is the demo's request: the input only.
type demoBody struct {
	Input json.RawMessage `json:"input"`
}

// demoAnswer is the demo's answer: the output or the error, never a receipt
// (there is none).
type demoAnswer struct {
	Agent  string          `json:"agent"`
	Output json.RawMessage `json:"output"`
	Error  *holon.Error    `json:"error,omitempty"`
	MS     int64           `json:"ms"`
}

// cors answers the site's origin, and only it; false when the request
// comes from another origin.
func (d *demo) cors(w http.ResponseWriter, r *http.Request) bool {
	w.Header().Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser's cross-origin request
	}
	if d.origin == "" || origin != d.origin {
		return false
	}
	w.Header().Set("Access-Control-Allow-Origin", d.origin)
	return true
}

// preflight answers the browser's OPTIONS before a cross-origin POST.
func (d *demo) preflight(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !d.cors(w, r) {
		web.Answer(w, holon.Errorf(web.CodeForbidden, "the demo answers pages of the public site only (HOLON_SITE_URL)"))
		return
	}
	w.Header().Set("Access-Control-Allow-Methods", "POST")
	w.Header().Set("Access-Control-Allow-Headers", demoAllowedHeader)
	w.Header().Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

func (d *demo) try(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ *auth.Principal) {
	if !d.cors(w, r) {
		web.Answer(w, holon.Errorf(web.CodeForbidden, "the demo answers pages of the public site only (HOLON_SITE_URL)"))
		return
	}
	id := ps.ByName("ns") + "/" + ps.ByName("name")
	v, err := d.engine.Registry().Resolve(id)
	if err == nil && !demoAgent(v) {
		err = holon.Errorf(holon.CodeNotFound, "%s cannot be tried here: the demo runs the gateway's own cheap agents only (at most %s a run, no delegated calls)", id, demoMaxWorstCase)
	}
	if err != nil {
		web.Answer(w, err)
		return
	}
	b, err := web.ReadBody(r)
	if err != nil {
		web.Answer(w, err)
		return
	}
	if len(b) > demoMaxInput {
		web.Answer(w, holon.Errorf(web.CodeBodyTooLarge, "a demo input is at most %d bytes; try a shorter one", demoMaxInput))
		return
	}
	var body demoBody
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || dec.More() || len(body.Input) == 0 {
		web.Answer(w, holon.Errorf(holon.CodeInvalidRequest, `the body is {"input": {...}}, the agent's input`))
		return
	}
	if s := string(body.Input); strings.Contains(s, demoFilePrefix) && strings.Count(s, demoFilePrefix) != strings.Count(s, demoSampleFiles) {
		web.Answer(w, holon.Errorf(holon.CodeFileNotFound, "the demo takes sample files only (%s…), not uploaded ones", demoSampleFiles))
		return
	}
	// Both limits are counted only for a try that will run.
	if ok, wait := d.visitor.Allow(web.ClientAddr(r, d.trustProxy)); !ok {
		w.Header().Set("Retry-After", web.RetryAfter(wait))
		web.Answer(w, holon.Errorf(web.CodeRateLimited, "%d demo tries an hour per visitor: retry in %s s", demoPerVisitor, web.RetryAfter(wait)))
		return
	}
	if !d.all.AllowN(d.now(), 1) {
		w.Header().Set("Retry-After", "60")
		web.Answer(w, holon.Errorf(web.CodeRateLimited, "the demo's %d tries of this hour are used up: retry later", demoPerHour))
		return
	}
	res := d.engine.Try(r.Context(), v, "demo", body.Input, demoTimeout)
	ans := demoAnswer{Agent: v.Manifest.Ref(), Output: res.Output, MS: res.Duration.Milliseconds()}
	status := http.StatusOK
	if res.Error == "" && len(res.Output) > demoMaxOutput {
		res.Error, res.Message = holon.CodeInvalidOutput, "the demo shows short results only: try a smaller input"
	}
	if res.Error != "" {
		ans.Output = json.RawMessage("null")
		ans.Error = &holon.Error{Code: res.Error, Msg: res.Message}
		status = http.StatusBadGateway
		switch res.Error {
		case holon.CodeRejectedInput:
			status = http.StatusUnprocessableEntity
		case holon.CodeGatewayError:
			status = http.StatusInternalServerError
		}
	}
	web.JSON(w, status, ans)
}

// demoAgent reports whether a version may be tried in the demo: shipped
// with the gateway, cheap, and with no downstream calls to pay.
func demoAgent(v *gateway.AgentVersion) bool {
	m := v.Manifest
	return v.Shipped && len(m.Calls) == 0 && m.WorstCase() <= demoMaxWorstCase
}
