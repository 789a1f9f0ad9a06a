package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ChildGatewayFlag is the hidden argument that makes `holon bench` serve a
// bench gateway for the inflight row, in a process of its own.
const ChildGatewayFlag = "--child-gateway"

// memStats is what the child gateway reports of its memory, after a GC.
type memStats struct {
	HeapAlloc  uint64 `json:"heap_alloc"`
	StackInuse uint64 `json:"stack_inuse"`
	Goroutines int    `json:"goroutines"`
	RSS        int64  `json:"rss"`
	Waiting    int    `json:"waiting"`
}

// goMem is the live Go memory: objects on the heap, and goroutine stacks.
func (m memStats) goMem() float64 { return float64(m.HeapAlloc + m.StackInuse) }

// ServeChildGateway serves a bench gateway (with bench/slow) in dir until
// ctx is done, writing "ready <url>" to out once it serves. Its /bench/
// endpoints report its memory (mem), how many runs of bench/slow wait
// (waiting), and release them (release).
func ServeChildGateway(ctx context.Context, dir string, out io.Writer) error {
	slow := newSlowAgent()
	mux := http.NewServeMux()
	mux.HandleFunc("/bench/waiting", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, slow.Waiting())
	})
	mux.HandleFunc("/bench/release", func(w http.ResponseWriter, r *http.Request) { slow.Release() })
	mux.HandleFunc("/bench/mem", func(w http.ResponseWriter, r *http.Request) {
		// Twice: buffers pooled for reuse (sync.Pool) are dropped by the second.
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		_ = json.NewEncoder(w).Encode(memStats{HeapAlloc: ms.HeapAlloc, StackInuse: ms.StackInuse,
			Goroutines: runtime.NumGoroutine(), RSS: procRSS(os.Getpid()), Waiting: slow.Waiting()})
	})
	g, err := openGateway(ctx, gatewayConfig{dir: dir, slow: slow, control: mux})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "ready %s\n", g.url)
	<-ctx.Done()
	slow.Release()
	return g.Close()
}

// inflight holds InFlight calls to a slow agent in a child gateway
// process, in two halves, and reads the child's memory before, at each
// half, and after they all settle: what one call in flight costs, and
// whether that stays constant (bounded) and comes back.
func (b *bench) inflight(ctx context.Context) ([]*Result, error) {
	o := b.o
	n := o.InFlight
	res := &Result{
		Name:   fmt.Sprintf("[7] memory for %s calls in flight to a slow agent (child gateway process, POST /v0/calls over loopback)", thousands(int64(n))),
		Target: "bounded, and reported per call",
	}
	if o.Holon == "" {
		res.Verdict = "skipped: no holon binary to start (run it as holon bench)"
		return []*Result{res}, nil
	}
	dir := filepath.Join(o.Dir, "inflight")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cmd := exec.Command(o.Holon, "bench", ChildGatewayFlag, dir)
	cmd.Env = childEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if err != nil || !ok {
		return nil, fmt.Errorf("child gateway: %v %q\n%s", err, line, stderr.String())
	}
	client := httpClient(n + 16)
	post := func(ctx context.Context, agent string, i int) error {
		body := fmt.Sprintf(`{"mandate":%q,"agent":%q,"input":{"n":%d}}`, mandateID(i), agent, i)
		resp, err := client.Post(url+"/v0/calls", "application/json", strings.NewReader(body))
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"billed":true`)) {
			return fmt.Errorf("POST /v0/calls %s: %s: %s", agent, resp.Status, b)
		}
		return nil
	}
	get := func(path string, v any) error {
		resp, err := client.Get(url + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(v)
	}
	// Warm the gateway: connections, lazy initialisation, pools.
	for i := range 200 {
		if err := post(ctx, agentEcho, i); err != nil {
			return nil, err
		}
	}
	var m [4]memStats
	if err := get("/bench/mem", &m[0]); err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	launch := func(from, to int) {
		for i := from; i < to; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := post(ctx, agentSlow, i); err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
				}
			}()
		}
	}
	waitFor := func(want int) error {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var got int
			if err := get("/bench/waiting", &got); err != nil {
				return err
			}
			if got >= want {
				return nil
			}
			errMu.Lock()
			err := firstErr
			errMu.Unlock()
			if err != nil {
				return err
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("only %d of %d calls reached the slow agent in 2 minutes", got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	half := n / 2
	launch(0, half)
	if err := waitFor(half); err != nil {
		return nil, err
	}
	if err := get("/bench/mem", &m[1]); err != nil {
		return nil, err
	}
	launch(half, n)
	if err := waitFor(n); err != nil {
		return nil, err
	}
	if err := get("/bench/mem", &m[2]); err != nil {
		return nil, err
	}
	resp, err := client.Post(url+"/bench/release", "text/plain", nil)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	// The calls are over: close the idle connections (each holds buffers
	// on the gateway's side), as clients that went away would.
	client.CloseIdleConnections()
	time.Sleep(200 * time.Millisecond)
	if err := get("/bench/mem", &m[3]); err != nil {
		return nil, err
	}
	perCall := (m[2].goMem() - m[0].goMem()) / float64(n)
	first := (m[1].goMem() - m[0].goMem()) / float64(half)
	second := (m[2].goMem() - m[1].goMem()) / float64(n-half)
	rssPer := float64(m[2].RSS-m[0].RSS) / float64(n)
	back := m[3].goMem() - m[0].goMem()
	heapPer := (float64(m[2].HeapAlloc) - float64(m[0].HeapAlloc)) / float64(n)
	stackPer := (float64(m[2].StackInuse) - float64(m[0].StackInuse)) / float64(n)
	res.Measured = fmt.Sprintf("%.1f KB of live Go heap and stacks per call in flight (heap %.1f KB, stacks %.1f KB; %.1f KB for the first %d, %.1f KB for the next %d), %.1f KB of RSS per call; %.1f goroutines per call; %s in flight in all",
		perCall/1024, heapPer/1024, stackPer/1024, first/1024, half, second/1024, n-half, rssPer/1024, float64(m[2].Goroutines-m[0].Goroutines)/float64(n), mb(m[2].goMem()-m[0].goMem()))
	res.Notes = append(res.Notes,
		fmt.Sprintf("child gateway: heap+stacks %s before, %s at %d in flight, %s at %d, %s after all settled (goroutines %d, %d, %d, %d); RSS %s → %s",
			mb(m[0].goMem()), mb(m[1].goMem()), half, mb(m[2].goMem()), n, mb(m[3].goMem()),
			m[0].Goroutines, m[1].Goroutines, m[2].Goroutines, m[3].Goroutines, mb(float64(m[0].RSS)), mb(float64(m[2].RSS))),
		fmt.Sprintf("all %s calls settled and billed once released", thousands(int64(n))))
	bounded := second <= 1.5*first+1024 && back <= 0.1*(m[2].goMem()-m[0].goMem())+(1<<20)
	res.judge(bounded, "memory per call grew with the number in flight, or did not come back once the calls settled")
	if !bounded && errors.Is(ctx.Err(), context.Canceled) {
		return nil, ctx.Err()
	}
	return []*Result{res}, nil
}
