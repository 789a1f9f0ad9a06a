package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"holon.dev/holon/journal"
)

// api is a client of the gateway's HTTP API.
type api struct {
	base string
	hc   *http.Client
}

func newAPI(base string, conns int) *api {
	return &api{base: base, hc: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}}}
}

// answer is a decoded answer of the API.
type answer struct {
	Status int
	Body   []byte
	// Of POST /v0/calls and approvals:
	Output   json.RawMessage `json:"output"`
	Receipt  *receipt        `json:"receipt"`
	Approval *struct {
		ID string `json:"id"`
	} `json:"approval"`
	Replayed bool `json:"replayed"`
	Error    *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// code is the answer's error code ("" when none).
func (a *answer) code() string {
	if a.Error == nil {
		return ""
	}
	return a.Error.Code
}

// receipt is the part of a receipt the drills check.
type receipt struct {
	ID      string  `json:"id"`
	Status  string  `json:"status"`
	Error   *string `json:"error"`
	Billed  bool    `json:"billed"`
	Mandate string  `json:"mandate"`
	Parent  *string `json:"parent"`
	Cost    struct {
		Own   string `json:"own"`
		Total string `json:"total"`
	} `json:"cost"`
	// Agent and Children are for the refunds of the load.
	Agent    *string  `json:"agent"`
	Children []string `json:"children"`
}

// do sends a request; err is a transport error (no answer).
func (c *api) do(ctx context.Context, method, path, key string, body any, header ...string) (*answer, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, err
	}
	a := &answer{Status: resp.StatusCode, Body: raw}
	_ = json.Unmarshal(raw, a)
	return a, nil
}

// must sends a request and wants the status given.
func (c *api) must(ctx context.Context, want int, method, path, key string, body any) (*answer, error) {
	a, err := c.do(ctx, method, path, key, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if a.Status != want {
		return nil, fmt.Errorf("%s %s: %d, want %d: %.400s", method, path, a.Status, want, a.Body)
	}
	return a, nil
}

// account is a signed-up account of a drill.
type account struct {
	handle, human, agent string
}

// signup creates an account and tops its balance up to credit (admin).
func (c *api) signup(ctx context.Context, handle, adminKey, credit string) (*account, error) {
	a, err := c.must(ctx, http.StatusCreated, "POST", "/v0/signup", "", map[string]string{"handle": handle, "email": handle + "@drill.example"})
	if err != nil {
		return nil, err
	}
	var keys struct {
		HumanKey string `json:"human_key"`
		AgentKey string `json:"agent_key"`
	}
	if err := json.Unmarshal(a.Body, &keys); err != nil {
		return nil, err
	}
	if credit != "" {
		if _, err := c.must(ctx, http.StatusOK, "POST", "/v0/admin/credit", adminKey, map[string]string{"account": handle, "amount": credit, "reason": "drill"}); err != nil {
			return nil, err
		}
	}
	return &account{handle: handle, human: keys.HumanKey, agent: keys.AgentKey}, nil
}

// mandate creates <handle>/<name> over the drill's agents.
func (c *api) mandate(ctx context.Context, acc *account, name, total, perCall, approvalAbove string) error {
	m := map[string]any{
		"id": name, "grantee": acc.handle + "/bot",
		"budget": map[string]string{"total": total, "per_call": perCall},
		"allow":  map[string]any{"agents": []string{"drill/*", maker + "/*"}},
	}
	if approvalAbove != "" {
		m["approval"] = map[string]string{"above": approvalAbove}
	}
	_, err := c.must(ctx, http.StatusCreated, "POST", "/v0/mandates", acc.human, m)
	return err
}

// mandateState is GET /v0/mandates/{id}'s budget.
type mandateState struct {
	Spent, Reserved, Remaining string
	Total                      string
}

// crasher signs up the account the crash drills load: 100,000.00 of
// credit, mandate main (50,000.00, 1.00 a call, approval above 0.50) and
// mandate tight (0.30, so that it runs out under load). It returns the
// account and each mandate's total.
func (c *api) crasher(ctx context.Context, adminKey string) (*account, map[string]journal.Amount, error) {
	acc, err := c.signup(ctx, "crasher", adminKey, "100000.00")
	if err != nil {
		return nil, nil, err
	}
	if err := c.mandate(ctx, acc, "main", "50000.00", "1.00", "0.50"); err != nil {
		return nil, nil, err
	}
	if err := c.mandate(ctx, acc, "tight", "0.30", "1.00", ""); err != nil {
		return nil, nil, err
	}
	return acc, map[string]journal.Amount{
		"crasher/main":  journal.MustParseAmount("50000.00"),
		"crasher/tight": journal.MustParseAmount("0.30"),
	}, nil
}

func (c *api) mandateState(ctx context.Context, key, id string) (*mandateState, error) {
	a, err := c.must(ctx, http.StatusOK, "GET", "/v0/mandates/"+id, key, nil)
	if err != nil {
		return nil, err
	}
	var st struct {
		Mandate struct {
			Budget struct {
				Total string `json:"total"`
			} `json:"budget"`
		} `json:"mandate"`
		Spent     string `json:"spent"`
		Reserved  string `json:"reserved"`
		Remaining string `json:"remaining"`
	}
	if err := json.Unmarshal(a.Body, &st); err != nil {
		return nil, err
	}
	return &mandateState{Spent: st.Spent, Reserved: st.Reserved, Remaining: st.Remaining, Total: st.Mandate.Budget.Total}, nil
}

// call is POST /v0/calls.
func (c *api) call(ctx context.Context, key, mandate, agent string, in agentInput, idem string) (*answer, error) {
	body := map[string]any{"mandate": mandate, "agent": agent, "input": in}
	if idem != "" {
		return c.do(ctx, "POST", "/v0/calls", key, body, "Idempotency-Key", idem)
	}
	return c.do(ctx, "POST", "/v0/calls", key, body)
}
