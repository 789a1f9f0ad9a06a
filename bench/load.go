package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// loadResult is what a pool of clients measured: the calls that started
// and ended inside the measurement window, and their latencies.
type loadResult struct {
	Calls   int
	Elapsed time.Duration
	Lat     latencies
}

// add is r and o measured as one load: their calls, windows and
// latencies together.
func (r loadResult) add(o loadResult) loadResult {
	lat := append(slices.Clone(r.Lat), o.Lat...)
	slices.Sort(lat)
	return loadResult{Calls: r.Calls + o.Calls, Elapsed: r.Elapsed + o.Elapsed, Lat: lat}
}

// Rate is calls per second over the window.
func (r loadResult) Rate() float64 { return float64(r.Calls) / r.Elapsed.Seconds() }

// alternatingBlocks splits a row's window and warm-up into n blocks a
// side, for two loads run alternately (one block under --quick): the
// blocks, each block's window and each block's warm-up.
func alternatingBlocks(o Options, n int) (blocks int, window, warm time.Duration) {
	if o.Quick {
		n = 1
	}
	return n, o.Duration / time.Duration(n), warmUp(o) / time.Duration(2*n)
}

// rotate runs blocks rounds of the loads (each given the round's
// number), in turns, a different one first in each round (two loads:
// each first in every other round), so that the machine's drift falls on
// all alike.
func rotate(blocks int, loads ...func(round int) error) error {
	for i := range blocks {
		for j := range loads {
			if err := loads[(i+j)%len(loads)](i); err != nil {
				return err
			}
		}
	}
	return nil
}

// runLoad runs do from clients goroutines: a warm-up, then the measured
// window of length dur. do gets the client's number; an error stops the
// load and is returned (the first one).
func runLoad(ctx context.Context, clients int, warm, dur time.Duration, do func(ctx context.Context, client int) error) (loadResult, error) {
	return runLoadDuring(ctx, clients, warm, func(ctx context.Context) { sleep(ctx, dur) }, do)
}

// runLoadDuring is runLoad with a window that lasts as long as window runs
// (it must return when its ctx is done).
func runLoadDuring(ctx context.Context, clients int, warm time.Duration, window func(context.Context), do func(ctx context.Context, client int) error) (loadResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		measuring atomic.Bool
		stopping  atomic.Bool
		errOnce   sync.Once
		firstErr  error
		wg        sync.WaitGroup
	)
	lats := make([][]time.Duration, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 4096)
			for !stopping.Load() && ctx.Err() == nil {
				in := measuring.Load()
				t := time.Now()
				if err := do(ctx, c); err != nil {
					if ctx.Err() == nil {
						errOnce.Do(func() { firstErr = fmt.Errorf("client %d: %w", c, err) })
					}
					cancel()
					return
				}
				if in && measuring.Load() {
					lat = append(lat, time.Since(t))
				}
			}
			lats[c] = lat
		}()
	}
	sleep(ctx, warm)
	measuring.Store(true)
	start := time.Now()
	window(ctx)
	measuring.Store(false)
	elapsed := time.Since(start)
	stopping.Store(true)
	wg.Wait()
	if firstErr != nil {
		return loadResult{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return loadResult{}, err
	}
	var all latencies
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	return loadResult{Calls: len(all), Elapsed: elapsed, Lat: all}, nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// latencies are sorted durations.
type latencies []time.Duration

// P is the q-quantile (0 < q ≤ 1), nearest rank.
func (l latencies) P(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	i := int(q*float64(len(l))+0.5) - 1
	return l[min(max(i, 0), len(l)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

// thousands writes n with thousands separators.
func thousands(n int64) string {
	s, sign := fmt.Sprint(n), ""
	if n < 0 {
		// On the digits: -n overflows for the smallest int64, which a
		// rate of no calls converted to int64 gives.
		s, sign = s[1:], "-"
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return sign + s
}

func mb(b float64) string { return fmt.Sprintf("%.1f MB", b/(1<<20)) }

// httpClient is a client for loopback load: up to conns kept-alive
// connections, no proxy, no compression.
func httpClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}}
}

// listen listens on a free loopback port.
func listen() (net.Listener, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	return ln, "http://" + ln.Addr().String(), nil
}
