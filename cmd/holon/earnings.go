package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// earningsCommand is holon earnings: an author's versions, their
// evaluations and what each earned, from GET /v0/me/agents.
type earningsCommand struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

func (c *earningsCommand) Name() string { return "earnings" }
func (c *earningsCommand) Synopsis() string {
	return "list your agents' versions, evaluations and earnings"
}

// meAgents is the answer of GET /v0/me/agents, as far as the table needs it.
type meAgents struct {
	Account  string `json:"account"`
	Versions []struct {
		Ref        string `json:"ref"`
		Listed     bool   `json:"listed"`
		Queued     bool   `json:"evaluation_queued"`
		Evaluation *struct {
			Passed bool   `json:"passed"`
			Error  string `json:"error"`
			Suites []struct {
				Public struct{ Passed, Failed int } `json:"public"`
				Hidden struct{ Passed, Failed int } `json:"hidden"`
			} `json:"suites"`
		} `json:"evaluation"`
		Earnings map[string]struct {
			PaidCalls int64  `json:"paid_calls"`
			Own       string `json:"own"`
			Royalties string `json:"royalties"`
			Total     string `json:"total"`
		} `json:"earnings"`
	} `json:"versions"`
}

func (c *earningsCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("earnings", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	url := fs.String("url", "", "the gateway's base URL (default: $HOLON_URL)")
	key := fs.String("key", "", "your human key, hlk_h_… (default: $HOLON_KEY)")
	asJSON := fs.Bool("json", false, "print the gateway's answer as JSON")
	fs.Usage = func() {
		fmt.Fprintln(c.stderr, `Usage: holon earnings [--url URL] [--key KEY] [--json]

Lists the versions of your agents (GET /v0/me/agents): whether each is
listed, its last evaluation (public and hidden cases passed) and what it
earned per currency: your share of its paid calls, and the royalties its
forks paid it. Amounts come from counters the gateway keeps as calls settle;
holon verify checks them against the journal.`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return errUsage
	}
	if *url == "" {
		*url = c.getenv("HOLON_URL")
	}
	if *key == "" {
		*key = c.getenv("HOLON_KEY")
	}
	if *url == "" || *key == "" {
		return errors.New("needs the gateway (--url or HOLON_URL) and your human key (--key or HOLON_KEY)")
	}
	body, err := getWithKey(ctx, strings.TrimRight(*url, "/")+"/v0/me/agents", *key)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err := c.stdout.Write(body)
		return err
	}
	var me meAgents
	if err := json.Unmarshal(body, &me); err != nil {
		return fmt.Errorf("the gateway's answer: %w", err)
	}
	return c.table(me)
}

// table prints one line per version and currency.
func (c *earningsCommand) table(me meAgents) error {
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "VERSION\tLISTED\tEVALUATED\tCURRENCY\tPAID CALLS\tOWN\tROYALTIES\tTOTAL")
	for _, v := range me.Versions {
		eval := "never"
		switch {
		case v.Queued:
			eval = "running"
		case v.Evaluation != nil:
			var pp, pt, hp, ht int
			for _, s := range v.Evaluation.Suites {
				pp, pt = pp+s.Public.Passed, pt+s.Public.Passed+s.Public.Failed
				hp, ht = hp+s.Hidden.Passed, ht+s.Hidden.Passed+s.Hidden.Failed
			}
			verdict := "failed"
			if v.Evaluation.Passed {
				verdict = "passed"
			}
			eval = fmt.Sprintf("%s %d/%d public, %d/%d hidden", verdict, pp, pt, hp, ht)
		}
		listed := "no"
		if v.Listed {
			listed = "yes"
		}
		if len(v.Earnings) == 0 {
			fmt.Fprintf(w, "%s\t%s\t%s\t-\t0\t0.00\t0.00\t0.00\n", v.Ref, listed, eval)
			continue
		}
		curs := make([]string, 0, len(v.Earnings))
		for cur := range v.Earnings {
			curs = append(curs, cur)
		}
		sort.Strings(curs)
		for _, cur := range curs {
			e := v.Earnings[cur]
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", v.Ref, listed, eval, cur, e.PaidCalls, e.Own, e.Royalties, e.Total)
		}
	}
	return w.Flush()
}

// getWithKey GETs url with a bearer key and returns the body of a 200; any
// other answer is an error carrying the gateway's code and message.
func getWithKey(ctx context.Context, url, key string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
			return nil, fmt.Errorf("the gateway answered %d %s: %s", resp.StatusCode, e.Error.Code, e.Error.Message)
		}
		return nil, fmt.Errorf("the gateway answered %d", resp.StatusCode)
	}
	return body, nil
}
