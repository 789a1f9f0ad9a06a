package publishing

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/web"
)

// yankAgent is DELETE /v0/agents/{ns}/{name}@{version}: the version stops
// being listed and resolved; its number stays taken.
func (h *handlers) yankAgent(w http.ResponseWriter, r *http.Request, ps httprouter.Params, p *auth.Principal) {
	ns, nameVersion := ps.ByName("ns"), ps.ByName("name")
	ref := ns + "/" + nameVersion
	if !strings.Contains(nameVersion, "@") {
		h.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "name the exact version to yank: DELETE /v0/agents/%s@<version>", ref))
		return
	}
	if ns != p.Account {
		h.fail(w, r, web.NotFound("you published no version %s", ref))
		return
	}
	now := h.p.cfg.Now().UTC()
	err := h.p.cfg.Store.Update(r.Context(), func(tx holon.Tx) error {
		d, err := tx.Agent(ref)
		if errors.Is(err, holon.ErrNotFound) || err == nil && !d.Published {
			return web.NotFound("you published no version %s", ref)
		} else if err != nil {
			return err
		}
		if d.Yanked != "" {
			return holon.Errorf(accounts.CodeAlreadyYanked, "%s was yanked already, at %s", ref, d.Yanked)
		} else if yr, err := accounts.Yanked(tx, ref); err == nil {
			return holon.Errorf(accounts.CodeAlreadyYanked, "%s was withdrawn by the operator, at %s", ref, yr.Time.Format(time.RFC3339))
		}
		d.Yanked = now.Format(time.RFC3339)
		return tx.PutAgent(ref, d)
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.p.cfg.Engine.Registry().Remove(ref)
	h.log.Info("agent yanked", "agent", ref, "account", p.Account)
	web.JSON(w, http.StatusOK, map[string]any{"agent": ref, "yanked": now,
		"note": "the version is no longer listed; its number stays taken"})
}
