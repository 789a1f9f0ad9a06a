package accounts

import (
	"encoding/json"
	"strings"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/journal"
)

// Moderation actions, as the log names them.
const (
	ActionCredit  = "credit"
	ActionDisable = "disable"
	ActionYank    = "yank"
	// ActionClaim is a verified identity taking over an account made
	// with an unverified email.
	ActionClaim = "claim"
)

// maxReason bounds a moderation reason.
const maxReason = 1000

// LogEntry is one action in the moderation log (holon.BucketModLog,
// append-only): what was done, to whom, why and when.
type LogEntry struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	// Target is an account handle or an agent version (ns/name@version).
	Target string          `json:"target"`
	Reason string          `json:"reason"`
	Amount *journal.Amount `json:"amount,omitempty"`
	// Entry is the journal key of a credit (admin-credit:<uuid>).
	Entry string `json:"entry,omitempty"`
	// Agents are the versions a disable yanked with the account.
	Agents []string `json:"agents,omitempty"`
}

// AppendLog appends an entry to the moderation log (its Seq is the
// log's).
func AppendLog(tx holon.Tx, e LogEntry) error {
	_, err := tx.Append(holon.BucketModLog, e)
	return err
}

// Yank marks an agent version withdrawn by the operator
// (holon.BucketSettings, "yanked/<ns/name@version>"). Start-up skips it, so
// a yank outlives restarts whatever the version's source.
type Yank struct {
	Ref    string    `json:"ref"`
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
}

func yankKey(ref string) string { return "yanked/" + ref }

// Yanked reads the operator's yank of a version; holon.ErrNotFound when
// it was not yanked.
func Yanked(tx holon.Tx, ref string) (*Yank, error) {
	y := new(Yank)
	if err := tx.Get(holon.BucketSettings, yankKey(ref), y); err != nil {
		return nil, err
	}
	return y, nil
}

// YankedRefs lists the versions the operator withdrew.
func YankedRefs(store holon.Store) ([]string, error) {
	var refs []string
	err := store.View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketSettings, "yanked/", func(k string, _ json.RawMessage) (bool, error) {
			refs = append(refs, strings.TrimPrefix(k, "yanked/"))
			return true, nil
		})
	})
	return refs, err
}

// PutYank records the operator's yank of a version and logs it.
func PutYank(tx holon.Tx, ref, reason string, now time.Time) error {
	if err := tx.Put(holon.BucketSettings, yankKey(ref), Yank{Ref: ref, Reason: reason, Time: now}); err != nil {
		return err
	}
	return AppendLog(tx, LogEntry{Time: now, Actor: auth.KindAdmin, Action: ActionYank, Target: ref, Reason: reason})
}

// checkReason refuses a moderation reason that is empty or too long.
func checkReason(reason string) error {
	reason = strings.TrimSpace(reason)
	switch {
	case reason == "":
		return holon.Errorf(holon.CodeInvalidRequest, "reason is required: the moderation log keeps why each action was taken")
	case len(reason) > maxReason:
		return holon.Errorf(holon.CodeInvalidRequest, "reason is longer than %d characters", maxReason)
	}
	return nil
}
