package drill

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// gatewayProc is the real `holon serve --hosted` in a child process. Its
// address, store and settings stay the same across restarts, as on a host
// whose service manager restarts it.
type gatewayProc struct {
	holon, db, addr, url string
	adminKey             string
	env                  []string
	// bodyTimeout is --body-timeout (5s when 0).
	bodyTimeout time.Duration
	// limitFile, when set, caps the size of any file the child writes
	// (RLIMIT_FSIZE), as a full disk would.
	limitFile uint64
	// args are more arguments of holon serve (--store …).
	args []string
	// keepLogs keeps the logs of every process started (their tail), not
	// only the last one's.
	keepLogs bool

	mu     sync.Mutex
	cmd    *exec.Cmd
	stderr *lockedBuffer
	exited chan struct{}
	err    error
	starts int
}

// serve starts the real gateway on a fresh store (holon.db in the drill's
// directory) with the agents of registry; set, when not nil, adjusts it
// before it starts. The caller kills it (defer g.kill()).
func (d *drill) serve(ctx context.Context, registry string, set func(*gatewayProc), env ...string) (*gatewayProc, error) {
	g, err := d.newGateway(filepath.Join(d.dir, "holon.db"), registry, env...)
	if err != nil {
		return nil, err
	}
	if set != nil {
		set(g)
	}
	if err := g.start(ctx); err != nil {
		return nil, err
	}
	return g, nil
}

// newGateway is newGateway with the drill's binary, and Options.GatewayEnv
// added last (so it wins).
func (d *drill) newGateway(db, registry string, env ...string) (*gatewayProc, error) {
	return newGateway(d.o.Holon, db, registry, append(env, d.o.GatewayEnv...)...)
}

// newGateway prepares a gateway on db with the drill's webhook agents
// (registry, a directory of holon.yaml files) and env added to its
// environment. Private endpoints are allowed: the drill's agents are on
// loopback.
func newGateway(holon, db, registry string, env ...string) (*gatewayProc, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	key := make([]byte, 24)
	_, _ = rand.Read(key)
	g := &gatewayProc{holon: holon, db: db, addr: addr, url: "http://" + addr, adminKey: "adm_" + hex.EncodeToString(key)}
	g.env = append(childEnv(),
		"HOLON_ADMIN_KEY="+g.adminKey,
		"HOLON_ALLOW_PRIVATE_ENDPOINTS=1",
		"HOLON_PUBLIC_URL="+g.url,
		"HOLON_REGISTRY="+registry,
		"HOLON_RATE_ACCOUNT=10000000/min",
		"HOLON_RATE_ADDRESS=10000000/min",
		"HOLON_RATE_SIGNUP=100000/h",
	)
	g.env = append(g.env, env...)
	return g, nil
}

// start execs the gateway and waits until /healthz answers 200. The first
// start retries on another port when the one picked was taken meanwhile
// (the child binds it after this process let it go); later starts keep
// the address the clients know.
func (g *gatewayProc) start(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := g.startOnce(ctx)
		if err == nil || g.starts > 1 || attempt == 4 || !strings.Contains(err.Error(), "address already in use") {
			return err
		}
		addr, perr := freePort()
		if perr != nil {
			return err
		}
		g.mu.Lock()
		g.starts = 0
		g.addr, g.url = addr, "http://"+addr
		for i, kv := range g.env {
			if strings.HasPrefix(kv, "HOLON_PUBLIC_URL=") {
				g.env[i] = "HOLON_PUBLIC_URL=" + g.url
			}
		}
		g.mu.Unlock()
	}
}

func (g *gatewayProc) startOnce(ctx context.Context) error {
	g.mu.Lock()
	bt := g.bodyTimeout
	if bt == 0 {
		bt = 5 * time.Second
	}
	cmd := exec.Command(g.holon, append([]string{"serve", "--hosted", "--db", g.db, "--addr", g.addr, "--shutdown-timeout", "5s", "--body-timeout", bt.String()}, g.args...)...)
	cmd.Dir = filepath.Dir(g.db)
	cmd.Env = g.env
	stderr := &lockedBuffer{}
	if g.keepLogs && g.stderr != nil {
		stderr = g.stderr
	}
	cmd.Stderr = stderr
	if err := g.startCmd(cmd); err != nil {
		g.mu.Unlock()
		return fmt.Errorf("start holon serve: %w", err)
	}
	exited := make(chan struct{})
	g.cmd, g.stderr, g.exited, g.err = cmd, stderr, exited, nil
	g.starts++
	g.mu.Unlock()
	go func() {
		err := cmd.Wait()
		g.mu.Lock()
		g.err = err
		g.mu.Unlock()
		close(exited)
	}()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := client.Get(g.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("holon serve exited before serving (%v):\n%s", g.exitErr(), tail(stderr.String(), 2000))
		case <-ctx.Done():
			g.kill()
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			g.kill()
			return fmt.Errorf("holon serve did not serve within 60s:\n%s", tail(stderr.String(), 2000))
		}
	}
}

// kill SIGKILLs the gateway and waits for it to be gone.
func (g *gatewayProc) kill() {
	g.mu.Lock()
	cmd, exited := g.cmd, g.exited
	g.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// stop asks the gateway to stop (SIGTERM) and waits; an exit other than 0
// is an error.
func (g *gatewayProc) stop() error {
	g.mu.Lock()
	cmd, exited := g.cmd, g.exited
	g.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		g.kill()
		return errors.New("holon serve did not stop within 30s of SIGTERM")
	}
	if err := g.exitErr(); err != nil {
		return fmt.Errorf("holon serve stopped with %v:\n%s", err, tail(g.stderr.String(), 2000))
	}
	return nil
}

// pid is the process id of the last process started.
func (g *gatewayProc) pid() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cmd == nil || g.cmd.Process == nil {
		return 0
	}
	return g.cmd.Process.Pid
}

// exitErr is how the last process ended (nil: exit 0, or still running).
func (g *gatewayProc) exitErr() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// logs is what the last process wrote to stderr.
func (g *gatewayProc) logs() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stderr == nil {
		return ""
	}
	return g.stderr.String()
}

// done is closed when the last process has exited.
func (g *gatewayProc) done() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.exited
}

// childEnv is this process's environment without any HOLON_ setting.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOLON_") {
			env = append(env, kv)
		}
	}
	return env
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// lockedBuffer is a bytes.Buffer safe for the writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 4<<20 { // keep the tail only
		rest := append([]byte(nil), l.b.Bytes()[l.b.Len()-(1<<20):]...)
		l.b.Reset()
		l.b.Write(rest)
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// crashLog is the part of a gateway's log that says why it died: from its
// panic or fatal error on (3,000 bytes), else its tail.
func crashLog(s string) string {
	for _, m := range []string{"panic: ", "fatal error: ", "unexpected fault address"} {
		if i := strings.LastIndex(s, m); i >= 0 {
			return s[i:min(len(s), i+2500)] + "…"
		}
	}
	return tail(s, 2000)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
