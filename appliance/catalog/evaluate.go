package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
)

// Evaluation bounds: how many versions are evaluated at once, how long one
// case and one whole run may take, and how many times a run cut short is
// started again before it is recorded as failed.
const (
	evalWorkers     = 2
	evalCaseTimeout = 60 * time.Second
	evalRunTimeout  = 10 * time.Minute
	evalMaxAttempts = 3
)

// evalQueued is a version waiting for (or in) its evaluation
// (holon.BucketEvalQueue, keyed by ref). It stays until the run's result is
// written, in the same transaction, so a run cut short by a restart is run
// again.
type evalQueued struct {
	Ref      string    `json:"ref"`
	Enqueued time.Time `json:"enqueued"`
	// Attempts counts the runs started; past evalMaxAttempts the version
	// is recorded as failed instead of run again.
	Attempts int `json:"attempts"`
}

// EvalResult is a version's last evaluation (holon.BucketEvals, keyed by ref).
// Hidden cases are kept as counts only: neither their ids nor what
// differed is stored, so no view can show them.
type EvalResult struct {
	Ref      string        `json:"ref"`
	Finished time.Time     `json:"finished"`
	Suites   []SuiteResult `json:"suites"`
	// Passed is true when at least one case ran and every case passed.
	Passed bool `json:"passed"`
	// Error says why a run could not be completed (it counts as failed).
	Error string `json:"error,omitempty"`
}

// SuiteResult is one capability's suite run on a version.
type SuiteResult struct {
	Capability string `json:"capability"`
	// Version identifies the suite's cases ("sha256:…"); Source is public
	// (shipped) or private (HOLON_PRIVATE_EVALS).
	Version string     `json:"version"`
	Source  string     `json:"source"`
	Public  CaseCounts `json:"public"`
	Hidden  CaseCounts `json:"hidden"`
	// Cases are the public cases, in detail.
	Cases []CaseResult `json:"cases"`
}

// CaseCounts counts passed and failed cases.
type CaseCounts struct {
	Passed int `json:"passed"`
	Failed int `json:"failed"`
}

// CaseResult is one public case's outcome: what differed when it failed.
type CaseResult struct {
	ID     string `json:"id"`
	Passed bool   `json:"passed"`
	Diff   string `json:"diff,omitempty"`
	MS     int64  `json:"ms"`
}

// evaluator runs the suites of spec/evals.md on versions in the background:
// never billed (gateway.Engine.Try), at most evalWorkers at a time, each
// bounded in time, from a queue kept in the store.
type evaluator struct {
	engine *gateway.Engine
	store  holon.Store
	suites map[string]*evalSuite
	log    *slog.Logger
	now    func() time.Time

	caseTimeout, runTimeout time.Duration

	wake    chan struct{}
	mu      sync.Mutex
	running map[string]bool
	wg      sync.WaitGroup
}

func newEvaluator(e *gateway.Engine, suites map[string]*evalSuite, log *slog.Logger, now func() time.Time) *evaluator {
	ev := &evaluator{engine: e, store: e.Store(), suites: suites, log: log, now: now,
		caseTimeout: evalCaseTimeout, runTimeout: evalRunTimeout,
		wake: make(chan struct{}, 1), running: map[string]bool{}}
	return ev
}

func (ev *evaluator) enqueue(ctx context.Context, ref string) error {
	v, ok := ev.engine.Registry().Get(ref)
	if !ok {
		return holon.Errorf(holon.CodeNotFound, "no listed version %s", ref)
	}
	if len(ev.suitesFor(v.Manifest)) == 0 {
		return nil
	}
	err := ev.store.Update(ctx, func(tx holon.Tx) error {
		return tx.Put(holon.BucketEvalQueue, ref, evalQueued{Ref: ref, Enqueued: ev.now().UTC()})
	})
	if err != nil {
		return fmt.Errorf("queue evaluation of %s: %w", ref, err)
	}
	select {
	case ev.wake <- struct{}{}:
	default:
	}
	return nil
}

// suitesFor are the suites of a manifest's capabilities, in capability order.
func (ev *evaluator) suitesFor(m *contract.Manifest) []*evalSuite {
	var out []*evalSuite
	caps := append([]string(nil), m.Capabilities...)
	sort.Strings(caps)
	for _, c := range caps {
		if s := ev.suites[c]; s != nil {
			out = append(out, s)
		}
	}
	return out
}

// restore gives every listed version its last result's verdict: at
// start-up, after the registry is loaded (published versions included).
func (ev *evaluator) restore() error {
	return ev.store.View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketEvals, "", func(ref string, raw json.RawMessage) (bool, error) {
			var res EvalResult
			if err := json.Unmarshal(raw, &res); err != nil {
				return false, fmt.Errorf("evaluation of %s: %w", ref, err)
			}
			ev.engine.Registry().SetFacts(ref, func(f *contract.AgentFacts) { f.Evaluated = res.Passed })
			return true, nil
		})
	})
}

// result reads a version's last evaluation (nil when it has none).
func (ev *evaluator) result(tx holon.Tx, ref string) (*EvalResult, error) {
	var res EvalResult
	if err := tx.Get(holon.BucketEvals, ref, &res); err != nil {
		if errors.Is(err, holon.ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	return &res, nil
}

// queued reports whether a version waits for (or is in) an evaluation.
func (ev *evaluator) queued(tx holon.Tx, ref string) bool {
	var q evalQueued
	return tx.Get(holon.BucketEvalQueue, ref, &q) == nil
}

// run dispatches queued versions to at most evalWorkers runs until ctx is
// done; runs in flight then stop where they are, and stay queued.
func (ev *evaluator) run(ctx context.Context) {
	defer ev.wg.Wait()
	for {
		if err := ev.dispatch(ctx); err != nil && ctx.Err() == nil {
			ev.log.Error("evaluation queue", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ev.wake:
		case <-time.After(time.Minute):
		}
	}
}

// dispatch starts runs for the queued versions not yet running, while
// workers are free.
func (ev *evaluator) dispatch(ctx context.Context) error {
	var refs []string
	err := ev.store.View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketEvalQueue, "", func(ref string, _ json.RawMessage) (bool, error) {
			refs = append(refs, ref)
			return true, nil
		})
	})
	if err != nil {
		return err
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for _, ref := range refs {
		if len(ev.running) >= evalWorkers {
			break
		}
		if ev.running[ref] {
			continue
		}
		ev.running[ref] = true
		ev.wg.Add(1)
		go func() {
			defer ev.wg.Done()
			ev.evaluate(ctx, ref)
			ev.mu.Lock()
			delete(ev.running, ref)
			ev.mu.Unlock()
			select {
			case ev.wake <- struct{}{}:
			default:
			}
		}()
	}
	return nil
}

// evaluate runs one queued version: it counts the attempt, runs every
// case, and writes the result and removes the queue entry together. A run
// stopped by shutdown writes nothing and stays queued.
func (ev *evaluator) evaluate(ctx context.Context, ref string) {
	var q evalQueued
	err := ev.store.Update(ctx, func(tx holon.Tx) error {
		if err := tx.Get(holon.BucketEvalQueue, ref, &q); err != nil {
			return err
		}
		q.Attempts++
		return tx.Put(holon.BucketEvalQueue, ref, q)
	})
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, holon.ErrNotFound) {
			ev.log.Error("start evaluation", "ref", ref, "err", err)
		}
		return
	}
	v, listed := ev.engine.Registry().Get(ref)
	res := &EvalResult{Ref: ref, Suites: []SuiteResult{}}
	switch {
	case !listed:
		// Yanked while it waited: nothing to measure, nothing to keep.
		ev.finish(ctx, ref, nil)
		return
	case q.Attempts > evalMaxAttempts:
		res.Error = fmt.Sprintf("the evaluation was cut short %d times", q.Attempts-1)
	default:
		rctx, cancel := context.WithTimeout(ctx, ev.runTimeout)
		res.Suites = ev.runSuites(rctx, v)
		timedOut := rctx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			return // shutdown: run again at the next start
		}
		if timedOut {
			res.Error = fmt.Sprintf("the evaluation took longer than %s", ev.runTimeout)
		}
	}
	ran := 0
	res.Passed = res.Error == ""
	for _, s := range res.Suites {
		ran += s.Public.Passed + s.Public.Failed + s.Hidden.Passed + s.Hidden.Failed
		if s.Public.Failed+s.Hidden.Failed > 0 {
			res.Passed = false
		}
	}
	res.Passed = res.Passed && ran > 0
	res.Finished = ev.now().UTC()
	ev.finish(ctx, ref, res)
}

// finish writes a result (nil: none) and takes the version off the queue,
// in one transaction, then lets admission know the verdict.
func (ev *evaluator) finish(ctx context.Context, ref string, res *EvalResult) {
	err := ev.store.Update(ctx, func(tx holon.Tx) error {
		if res != nil {
			if err := tx.Put(holon.BucketEvals, ref, res); err != nil {
				return err
			}
		}
		return tx.Delete(holon.BucketEvalQueue, ref)
	})
	if err != nil {
		if ctx.Err() == nil {
			ev.log.Error("record evaluation", "ref", ref, "err", err)
		}
		return
	}
	if res != nil {
		ev.engine.Registry().SetFacts(ref, func(f *contract.AgentFacts) { f.Evaluated = res.Passed })
	}
}

// runSuites runs every case of the version's suites, one after another.
func (ev *evaluator) runSuites(ctx context.Context, v *gateway.AgentVersion) []SuiteResult {
	out := []SuiteResult{}
	for _, s := range ev.suitesFor(v.Manifest) {
		sr := SuiteResult{Capability: s.Capability, Version: s.Version, Source: s.Source, Cases: []CaseResult{}}
		for _, c := range s.Cases {
			diff, ms := ev.runCase(ctx, v, c)
			switch {
			case !c.Public && diff == "":
				sr.Hidden.Passed++
			case !c.Public:
				sr.Hidden.Failed++
			case diff == "":
				sr.Public.Passed++
				sr.Cases = append(sr.Cases, CaseResult{ID: c.ID, Passed: true, MS: ms})
			default:
				sr.Public.Failed++
				sr.Cases = append(sr.Cases, CaseResult{ID: c.ID, Diff: diff, MS: ms})
			}
		}
		out = append(out, sr)
	}
	return out
}

// runCase runs one case and says what differed ("" when it passed).
func (ev *evaluator) runCase(ctx context.Context, v *gateway.AgentVersion, c evalCase) (string, int64) {
	if ctx.Err() != nil {
		return "not run: the evaluation ran out of time", 0
	}
	input, err := json.Marshal(c.Input)
	if err != nil {
		return "input: " + err.Error(), 0
	}
	// Marked as an evaluation: the case's fixtures (platform files) are
	// readable by this run, and by no call.
	res := ev.engine.Try(gateway.WithEvaluation(ctx), v, "eval", input, ev.caseTimeout)
	ms := res.Duration.Milliseconds()
	if c.Expect.Error != "" {
		if res.Error != c.Expect.Error {
			got := res.Error
			if got == "" {
				got = "an output"
			}
			return fmt.Sprintf("want error %s, got %s", c.Expect.Error, got), ms
		}
		return "", ms
	}
	if res.Error != "" {
		return "want an output, got error " + res.Error, ms
	}
	var got any
	if err := json.Unmarshal(res.Output, &got); err != nil {
		return "output: " + err.Error(), ms
	}
	return subsetDiff(c.Expect.OutputContains, got, "output"), ms
}

// waitIdle blocks until no evaluation runs and none is queued (tests).
func (ev *evaluator) waitIdle(ctx context.Context) error {
	for {
		empty := true
		if err := ev.store.View(func(tx holon.Tx) error {
			return tx.ForEach(holon.BucketEvalQueue, "", func(string, json.RawMessage) (bool, error) {
				empty = false
				return false, nil
			})
		}); err != nil {
			return err
		}
		ev.mu.Lock()
		busy := len(ev.running) > 0
		ev.mu.Unlock()
		if empty && !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// enqueueStale queues every listed version whose last evaluation is
// missing or was measured on other suites (a private suite rotated, a
// case added), so the shipped agents are evaluated too. A version already
// queued keeps its entry (and its attempts).
func (ev *evaluator) enqueueStale(ctx context.Context) error {
	reg := ev.engine.Registry()
	var stale []string
	err := ev.store.View(func(tx holon.Tx) error {
		for _, latest := range reg.Latest() {
			for _, v := range reg.Versions(latest.Manifest.ID) {
				suites := ev.suitesFor(v.Manifest)
				ref := v.Manifest.Ref()
				if len(suites) == 0 || ev.queued(tx, ref) {
					continue
				}
				res, err := ev.result(tx, ref)
				if err != nil {
					return err
				}
				if res == nil || !sameSuites(res, suites) {
					stale = append(stale, ref)
				}
			}
		}
		return nil
	})
	if err != nil || len(stale) == 0 {
		return err
	}
	now := ev.now().UTC()
	return ev.store.Update(ctx, func(tx holon.Tx) error {
		for _, ref := range stale {
			if err := tx.Put(holon.BucketEvalQueue, ref, evalQueued{Ref: ref, Enqueued: now}); err != nil {
				return err
			}
		}
		return nil
	})
}

// sameSuites reports whether a result was measured on exactly these suites.
func sameSuites(res *EvalResult, suites []*evalSuite) bool {
	if len(res.Suites) != len(suites) {
		return false
	}
	for i, s := range suites {
		if res.Suites[i].Capability != s.Capability || res.Suites[i].Version != s.Version {
			return false
		}
	}
	return true
}
