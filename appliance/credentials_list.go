package appliance

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"
	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/web"
)

// credentialStatus is one agent's endpoint credential as its author sees
// it: whether one is set, and since when; never the token.
type credentialStatus struct {
	Agent string    `json:"agent"`
	Set   time.Time `json:"set"`
	// Opens is false for a token sealed under another HOLON_FILE_SECRET:
	// calls go without it until its author sets it again.
	Opens bool `json:"opens"`
}

// listCredentials is GET /v0/me/credentials (human key): the agents of
// the caller's namespace that have an endpoint credential set.
func (a *api) listCredentials(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	v := a.hosted.vault
	out := []credentialStatus{}
	err := v.store.View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketCredentials, p.Account+"/", func(id string, raw json.RawMessage) (bool, error) {
			var rec credentialRecord
			if err := json.Unmarshal(raw, &rec); err != nil {
				return false, err
			}
			out = append(out, credentialStatus{Agent: id, Set: rec.Set, Opens: v.has(id)})
			return true, nil
		})
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, map[string]any{"credentials": out})
}
