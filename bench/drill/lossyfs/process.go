package lossyfs

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// serveEnv, set in a process's environment, makes it the server of one
// lossy filesystem (see init): the variable holds the backing directory and the mount point, a newline between.
const serveEnv = "LOSSYFS_SERVE"

// FS is a mounted lossy filesystem. Its server runs in a child process (a
// copy of this binary): a process that serves a FUSE filesystem must not
// touch it itself, since a thread blocked on it (a page fault in a file
// mapped from it, a forked child entering it before exec) can hold up the
// Go runtime, and with it the server, for ever.
type FS struct {
	backing, mountpoint string

	mu   sync.Mutex
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	last Stats
}

// Mount mounts a lossy view of backing (a directory) at mountpoint (an
// empty directory; both are created if need be). Everything backing holds
// now counts as durable.
func Mount(backing, mountpoint string) (*FS, error) {
	backing, mountpoint, err := makeDirs(backing, mountpoint)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), serveEnv+"="+backing+"\n"+mountpoint)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("lossyfs: start its server: %w", err)
	}
	f := &FS{backing: backing, mountpoint: mountpoint, cmd: cmd, in: in, out: bufio.NewReader(outPipe)}
	if _, err := f.answer(); err != nil {
		in.Close()
		cmd.Wait()
		return nil, err
	}
	return f, nil
}

// Dir is the mount point: where the program under test reads and writes.
func (f *FS) Dir() string { return f.mountpoint }

// Backing is the backing directory: what the disk holds.
func (f *FS) Backing() string { return f.backing }

// Stats returns the counts so far.
func (f *FS) Stats() Stats {
	st, err := f.ask("stats")
	if err != nil {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.last
	}
	return st
}

// Cut is a power cut: it unmounts the filesystem (every process using it
// must be gone: kill them first), discards every write and directory change
// not made durable, and mounts it again. When rng is not nil, each file
// keeps a random prefix of its unsynced writes (a torn write); else all of
// them are lost.
func (f *FS) Cut(rng *rand.Rand) error {
	cmd := "cut"
	if rng != nil {
		cmd = fmt.Sprintf("cut %d", rng.Uint64())
	}
	_, err := f.ask(cmd)
	return err
}

// Close unmounts the filesystem keeping everything written (a clean
// shutdown: everything reached the disk) and ends its server.
func (f *FS) Close() error {
	_, err := f.ask("close")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.in.Close()
	return errors.Join(err, f.cmd.Wait())
}

// ask sends one command and reads its answer.
func (f *FS) ask(cmd string) (Stats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := io.WriteString(f.in, cmd+"\n"); err != nil {
		return Stats{}, fmt.Errorf("lossyfs: its server is gone: %w", err)
	}
	return f.answerLocked()
}

func (f *FS) answer() (Stats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.answerLocked()
}

// answerLocked reads "ok <stats>" or "error <message>".
func (f *FS) answerLocked() (Stats, error) {
	line, err := f.out.ReadString('\n')
	if err != nil {
		return Stats{}, fmt.Errorf("lossyfs: its server is gone: %w", err)
	}
	verdict, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
	if verdict != "ok" {
		return Stats{}, errors.New(rest)
	}
	var st Stats
	if err := json.Unmarshal([]byte(rest), &st); err != nil {
		return Stats{}, fmt.Errorf("lossyfs: %q: %w", line, err)
	}
	f.last = st
	return st, nil
}

// init makes a process started by Mount the filesystem's server: it mounts,
// answers the commands on its stdin (stats, cut [seed], close), and exits
// once they end, unmounting first (when its parent dies, too).
func init() {
	v, ok := os.LookupEnv(serveEnv)
	if !ok {
		return
	}
	backing, mountpoint, _ := strings.Cut(v, "\n")
	os.Exit(serve(backing, mountpoint, os.Stdin, os.Stdout))
}

func serve(backing, mountpoint string, in io.Reader, out io.Writer) int {
	reply := func(st Stats, err error) {
		if err != nil {
			fmt.Fprintf(out, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			return
		}
		b, _ := json.Marshal(st)
		fmt.Fprintf(out, "ok %s\n", b)
	}
	d, err := mountDisk(backing, mountpoint)
	if err != nil {
		reply(Stats{}, err)
		return 1
	}
	reply(d.counts(), nil)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "stats":
			reply(d.counts(), nil)
		case "cut":
			var rng *rand.Rand
			if arg != "" {
				seed, err := strconv.ParseUint(arg, 10, 64)
				if err != nil {
					reply(Stats{}, err)
					continue
				}
				rng = rand.New(rand.NewPCG(seed, 7))
			}
			err := d.cut(rng)
			reply(d.counts(), err)
		case "close":
			err := d.close()
			reply(d.counts(), err)
			return 0
		default:
			reply(Stats{}, fmt.Errorf("lossyfs: no command %q", cmd))
		}
	}
	// The parent is gone: leave nothing mounted.
	d.close()
	return 0
}
