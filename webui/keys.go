package webui

import (
	"net/http"
	"strings"
)

// keyCreate makes an agent key for one of the human's mandates (POST
// /v0/keys) and shows it once on the mandate's page.
func (c *Console) keyCreate(w http.ResponseWriter, r *http.Request, v Viewer) {
	mandate := r.PostFormValue("mandate")
	var ans struct {
		Key string `json:"key"`
	}
	body := map[string]any{"mandate": mandate, "ask_in_client": r.PostFormValue("ask_in_client") == "on"}
	if err := c.b.Do(r, "POST", "/v0/keys", body, &ans); err != nil {
		c.fail(w, r, v, err)
		return
	}
	c.showMandate(w, r, v, mandate, ans.Key)
}

// keyRevoke revokes a key by its prefix (DELETE /v0/keys/{prefix}).
func (c *Console) keyRevoke(w http.ResponseWriter, r *http.Request, v Viewer) {
	if err := c.b.Do(r, "DELETE", apiPath("/v0/keys", r.PathValue("prefix")), nil, nil); err != nil {
		c.fail(w, r, v, err)
		return
	}
	back := localPath(r.PostFormValue("back"))
	if !strings.HasPrefix(back, Prefix+"/") {
		back = Prefix + "/"
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}
