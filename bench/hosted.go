package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"

	"holon.dev/holon/kv"
)

// targetHostedRatio is the share of row 1's throughput a hosted gateway
// must keep with agent keys and an Idempotency-Key on every call.
const targetHostedRatio = 0.85

// hostedBlocks is how many alternating blocks row 1b's two loads run in.
const hostedBlocks = 5

// hosted measures row 1's load on a hosted gateway: the payers signed up
// through the API, each calling with an agent key bound to its mandate and
// a fresh Idempotency-Key on every call (rate limits on, at no limit); in
// blocks alternating with row 1's own load on a dev gateway, which its
// ratio is read against.
func (b *bench) hosted(ctx context.Context) ([]*Result, error) {
	o := b.o
	res := &Result{
		Name:   fmt.Sprintf("[1b] the same through a hosted gateway (--hosted): agent keys, an Idempotency-Key on every call, %d clients", o.Clients),
		Target: fmt.Sprintf("≥ %.2f × row 1 (dev mode)", targetHostedRatio),
	}
	g, err := openGateway(ctx, gatewayConfig{dir: filepath.Join(o.Dir, "hosted"), hosted: true})
	if err != nil {
		return nil, err
	}
	defer g.Close()
	// Row 1's gateway and load again, run in blocks alternating with the
	// hosted one's, so that the machine's noise (the disk other work
	// shares, the other processes) falls on both sides alike: the ratio
	// is read against it, and against row 1's own run beside it.
	dev, dc, devBefore, err := openDevBeside(ctx, o, "hosted-dev")
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	client := httpClient(o.Clients)
	keys := make([]string, benchPayers)
	for i := range keys {
		if keys[i], err = hostedPayer(ctx, client, g.url, fmt.Sprintf("bench%02d", i)); err != nil {
			return nil, err
		}
	}
	bodies := make([][]byte, o.Clients)
	for c := range bodies {
		bodies[c] = fmt.Appendf(nil, `{"mandate":"bench%02d/bench","agent":%q,"input":{"n":%d}}`, c%benchPayers, agentEcho, c)
	}
	counts := make([]int64, o.Clients)
	hostedCall := func(ctx context.Context, c int) error {
		counts[c]++
		idem := "bench-" + strconv.Itoa(c) + "-" + strconv.FormatInt(counts[c], 10)
		if err := postBilledCall(ctx, client, g.url, bodies[c], "Authorization", "Bearer "+keys[c%benchPayers], "Idempotency-Key", idem); err != nil {
			counts[c]--
			return err
		}
		return nil
	}
	before, err := g.money()
	if err != nil {
		return nil, err
	}
	blocks, blockDur, warm := alternatingBlocks(o, hostedBlocks)
	var (
		hr, dr loadResult
		spans  [][2]kv.Stats
		prof   string
	)
	runHosted := func(i int) error {
		stop := func() string { return "" }
		if i == 0 {
			// The profile covers the first hosted block.
			var err error
			if stop, err = startProfile(o, "hosted.pprof"); err != nil {
				return err
			}
		}
		st0 := g.Store().Stats()
		r, err := runLoad(ctx, o.Clients, warm, blockDur, hostedCall)
		spans = append(spans, [2]kv.Stats{st0, g.Store().Stats()})
		if i == 0 {
			prof = stop()
		}
		if err != nil {
			return fmt.Errorf("hosted calls: %w", err)
		}
		hr = hr.add(r)
		return nil
	}
	runDev := func(int) error { return dc.block(ctx, o.Clients, warm, blockDur, &dr, "the hosted ones") }
	if err := rotate(blocks, runDev, runHosted); err != nil {
		return nil, err
	}
	var answered int64
	for _, n := range counts {
		answered += n
	}
	checked, err := g.checkMoney(before, int(answered))
	if err != nil {
		return nil, err
	}
	if _, err := dev.checkMoney(devBefore, int(dc.answered())); err != nil {
		return nil, fmt.Errorf("the dev gateway beside the hosted one: %w", err)
	}
	w := writerSpans(spans)
	ratio := hr.Rate() / dr.Rate()
	res.Measured = fmt.Sprintf("%s calls/s, p50 %s, p99 %s; %.2f × row 1's load on a dev gateway in the blocks between (%s calls/s)",
		thousands(int64(hr.Rate())), ms(hr.Lat.P(0.5)), ms(hr.Lat.P(0.99)), ratio, thousands(int64(dr.Rate())))
	if b.callsRate > 0 {
		res.Measured += fmt.Sprintf("; %.2f × row 1's own run (%s calls/s)", hr.Rate()/b.callsRate, thousands(int64(b.callsRate)))
	}
	note := fmt.Sprintf("%d blocks of %s on each side, row 1's load on a dev gateway and the hosted load alternately, each side first in every other block", blocks, blockDur)
	if blocks == 1 {
		note = fmt.Sprintf("one block of %s on each side, row 1's load on a dev gateway first", blockDur)
	}
	res.Notes = append(res.Notes, note, w.String(), checked)
	if prof != "" {
		res.Notes = append(res.Notes, prof)
	}
	perCall := float64(w.d.Updates) / float64(max(hr.Calls, 1))
	devUpdates := b.callsUpdates
	if devUpdates == 0 {
		devUpdates = 1
	}
	extra := "no update of its own (its claim is held in memory with the call's reservation, its outcome written in the settlement's transaction), and the caller waits for one durable commit, its settlement's, as in row 1; what a hosted call adds is work inside those updates (the key's records) and before them (the agent key's check)"
	if perCall > devUpdates+0.05 {
		extra = fmt.Sprintf("%.1f updates per call beyond row 1's, each run by the one writer", perCall-devUpdates)
	}
	res.judge(ratio >= targetHostedRatio, fmt.Sprintf("%.1f store updates per call against row 1's %.1f: the Idempotency-Key costs %s; %s", perCall, devUpdates, extra, w.why()))
	return []*Result{res}, nil
}

// hostedPayer signs an account up, gives it a mandate for the bench's
// agents and returns an agent key bound to it.
func hostedPayer(ctx context.Context, client *http.Client, base, handle string) (string, error) {
	var signup struct {
		HumanKey string `json:"human_key"`
	}
	if err := postJSON(ctx, client, base+"/v0/signup", "", map[string]any{"handle": handle, "email": handle + "@example.com"}, &signup); err != nil {
		return "", err
	}
	mandate := map[string]any{"id": "bench", "grantee": handle + "/assistant",
		"budget": map[string]any{"total": "1000000.00", "per_call": "1.00"}, "allow": map[string]any{"agents": []string{"bench/*"}}}
	if err := postJSON(ctx, client, base+"/v0/mandates", signup.HumanKey, mandate, nil); err != nil {
		return "", err
	}
	var key struct {
		Key string `json:"key"`
	}
	if err := postJSON(ctx, client, base+"/v0/keys", signup.HumanKey, map[string]any{"mandate": handle + "/bench"}, &key); err != nil {
		return "", err
	}
	if key.Key == "" {
		return "", fmt.Errorf("POST /v0/keys for %s: no key", handle)
	}
	return key.Key, nil
}

// postJSON posts body as JSON with a bearer key and decodes a 2xx answer into out.
func postJSON(ctx context.Context, client *http.Client, url, key string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, answer)
	}
	if out != nil {
		return json.Unmarshal(answer, out)
	}
	return nil
}
