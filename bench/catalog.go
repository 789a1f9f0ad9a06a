package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime/metrics"
	"sort"
	"sync"
	"time"

	"holon.dev/holon/gateway/contract"
)

// The catalogue row: GET /v0/agents?q= and GET /v0/catalog with many
// registered versions, p99 at most 20 ms.
const (
	catalogVersions = 10_000
	catalogTarget   = 20 * time.Millisecond
	// catalogTopics groups the agents, so that a q= search matches
	// catalogVersions/catalogTopics of them.
	catalogTopics = 1000
)

// catalogManifest is bench agent i, listed as id with capability: its
// summary names its topic.
func catalogManifest(id string, i int, capability string) string {
	return fmt.Sprintf(`id: %s
version: 1.0.0
summary: Catalogue bench agent %d, about topic-%04d.
license: proprietary
capabilities: [%s]
interface: {input: {type: object}, output: {type: object}}
pricing: {model: per_run, amount: %q, currency: EUR}
runtime: {kind: dev, tool: bench-echo}
`, id, i, i%catalogTopics, capability, callPrice)
}

// catalog registers the versions through App.RegisterVersion (what
// publishing does: the store record and the registry), then measures the
// search and the catalogue over loopback HTTP, one client at a time.
func (b *bench) catalog(ctx context.Context) ([]*Result, error) {
	n, requests := catalogVersions, 2000
	if b.o.Quick {
		n, requests = 2000, 300
	}
	g, err := openGateway(ctx, gatewayConfig{dir: filepath.Join(b.o.Dir, "catalog")})
	if err != nil {
		return nil, err
	}
	defer g.Close()
	start := time.Now()
	if err := registerMany(ctx, g, n); err != nil {
		return nil, err
	}
	registered := time.Since(start)
	client := httpClient(1)
	queries := []struct{ name, path string }{
		{"GET /v0/agents?q=", "/v0/agents?q=topic-%04d"},
		{"GET /v0/catalog", "/v0/catalog?after=cat%05d/agent"},
	}
	var out []*Result
	for _, q := range queries {
		lat := make(latencies, 0, requests)
		results := 0
		cpu0, alloc0 := goCPU(), heapAllocs()
		for i := 0; i < requests && ctx.Err() == nil; i++ {
			// Searches go round the topics; catalogue pages start anywhere.
			arg := (i * 7919) % n
			if q.name == "GET /v0/agents?q=" {
				arg = i % catalogTopics
			}
			url := g.url + fmt.Sprintf(q.path, arg)
			t0 := time.Now()
			got, err := getCount(ctx, client, url)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", q.name, err)
			}
			lat = append(lat, time.Since(t0))
			results = got
		}
		cpu := (goCPU() - cpu0) / time.Duration(max(len(lat), 1))
		alloc := (heapAllocs() - alloc0) / uint64(max(len(lat), 1))
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		r := &Result{
			Name:     fmt.Sprintf("%s with %s registered versions", q.name, thousands(int64(n))),
			Target:   "p99 ≤ " + ms(catalogTarget),
			Measured: fmt.Sprintf("p50 %s, p99 %s over %d requests", ms(lat.P(0.50)), ms(lat.P(0.99)), len(lat)),
			Notes: []string{
				fmt.Sprintf("versions registered with App.RegisterVersion (store record + registry, as publishing does) in %s", registered.Round(time.Millisecond)),
				fmt.Sprintf("%d bytes of answer, the last one; one client, sequential, over loopback HTTP", results),
				fmt.Sprintf("%s of CPU and %s allocated per request (gateway and client, Go's own count)%s: the machine's other work shows in the tail", ms(cpu), thousands(int64(alloc))+" B", loadAverage()),
			},
		}
		r.judge(lat.P(0.99) <= catalogTarget, "the answer scans the registry's latest versions on every request")
		out = append(out, r)
	}
	beside, err := b.publishBeside(ctx, g)
	if err != nil {
		return nil, err
	}
	return append(out, beside), nil
}

// publishOne lists agent id (bench agent i) through App.RegisterVersion,
// the path publishing takes (listVersion: the store record, the registry,
// the evaluation queued).
func publishOne(ctx context.Context, g *benchGateway, id string, i int, capability string) error {
	m, err := contract.ParseManifest([]byte(catalogManifest(id, i, capability)))
	if err != nil {
		return err
	}
	return g.app.RegisterVersion(ctx, m)
}

// registerMany registers n catalogue agents, 16 at a time (the store groups
// their commits).
func registerMany(ctx context.Context, g *benchGateway, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	next := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				err := publishOne(ctx, g, fmt.Sprintf("cat%05d/agent", i), i, fmt.Sprintf("bench.topic%d", i%10))
				if err != nil {
					select {
					case errs <- fmt.Errorf("register %d: %w", i, err):
					default:
					}
					return
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			wg.Wait()
			return err
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// goCPU is the CPU time the process's Go code and its GC used so far.
func goCPU() time.Duration {
	s := []metrics.Sample{{Name: "/cpu/classes/user:cpu-seconds"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	var sec float64
	for _, x := range s {
		if x.Value.Kind() == metrics.KindFloat64 {
			sec += x.Value.Float64()
		}
	}
	return time.Duration(sec * float64(time.Second))
}

// heapAllocs is how many bytes the process allocated so far.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		return s[0].Value.Uint64()
	}
	return 0
}

// getCount GETs url and returns the body's length; anything but 200 is an error.
func getCount(ctx context.Context, c *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	nb, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	return int(nb), nil
}
