package webui

import (
	"encoding/json"
	"net/http"
	"strings"
)

// publishForm is a manifest pasted as YAML or JSON.
type publishForm struct {
	Manifest string
	// Review is set when the manifest is a draft to look over.
	Review           bool
	Note             string
	Error, ErrorCode string
}

// connectForm is "Connect a webhook": what POST /v0/agents/draft needs.
type connectForm struct {
	Name, Endpoint, Input, Summary, Price string
	Error, ErrorCode                      string
}

func (c *Console) publishForm(w http.ResponseWriter, r *http.Request, v Viewer) {
	if c.authorOnly(w, r, v) {
		c.render(w, r, v, http.StatusOK, "authors_publish", publishForm{})
	}
}

// publish sends the manifest as typed (POST /v0/agents reads YAML and
// JSON alike); a refusal comes back beside the form with its code.
func (c *Console) publish(w http.ResponseWriter, r *http.Request, v Viewer) {
	if !c.authorOnly(w, r, v) {
		return
	}
	f := publishForm{Manifest: r.PostFormValue("manifest"), Review: r.PostFormValue("review") == "1"}
	ct := "application/yaml"
	if strings.HasPrefix(strings.TrimSpace(f.Manifest), "{") {
		ct = "application/json"
	}
	var ans struct {
		Agent         string `json:"agent"`
		CredentialSet bool   `json:"credential_set"`
	}
	err := c.b.Send(r, "POST", "/v0/agents", ct, strings.NewReader(f.Manifest), &ans)
	if status, code, msg, ok := apiRefusal(err); ok {
		f.Error, f.ErrorCode = msg, code
		c.render(w, r, v, status, "authors_publish", f)
		return
	} else if err != nil {
		c.fail(w, r, v, err)
		return
	}
	notice := ans.Agent + " is published and listed; its evaluation is queued."
	if !ans.CredentialSet {
		notice += " No endpoint credential is set for it: set one below if your server wants a token."
	}
	c.showAuthors(w, r, v, authorsPage{Notice: notice}, http.StatusCreated)
}

func (c *Console) connectWebhookForm(w http.ResponseWriter, r *http.Request, v Viewer) {
	if c.authorOnly(w, r, v) {
		c.render(w, r, v, http.StatusOK, "authors_connect", connectForm{Input: `{"text": "hello"}`})
	}
}

// connectWebhook drafts a listing from one call of the endpoint (POST
// /v0/agents/draft) and shows it for review: nothing is published until
// the author sends the reviewed manifest.
func (c *Console) connectWebhook(w http.ResponseWriter, r *http.Request, v Viewer) {
	if !c.authorOnly(w, r, v) {
		return
	}
	f := connectForm{Name: strings.TrimSpace(r.PostFormValue("name")), Endpoint: strings.TrimSpace(r.PostFormValue("endpoint")),
		Input: r.PostFormValue("input"), Summary: strings.TrimSpace(r.PostFormValue("summary")), Price: strings.TrimSpace(r.PostFormValue("price"))}
	var input json.RawMessage
	if err := json.Unmarshal([]byte(f.Input), &input); err != nil {
		f.Error, f.ErrorCode = "The example input is not JSON: "+err.Error(), "invalid_request"
		c.render(w, r, v, http.StatusBadRequest, "authors_connect", f)
		return
	}
	body := map[string]any{"name": f.Name, "endpoint": f.Endpoint, "input": input}
	if f.Summary != "" {
		body["summary"] = f.Summary
	}
	if f.Price != "" {
		body["price"] = f.Price
	}
	var ans struct {
		YAML string `json:"yaml"`
	}
	err := c.b.Do(r, "POST", "/v0/agents/draft", body, &ans)
	if status, code, msg, ok := apiRefusal(err); ok {
		f.Error, f.ErrorCode = msg, code
		c.render(w, r, v, status, "authors_connect", f)
		return
	} else if err != nil {
		c.fail(w, r, v, err)
		return
	}
	c.render(w, r, v, http.StatusOK, "authors_publish", publishForm{Manifest: ans.YAML, Review: true})
}
