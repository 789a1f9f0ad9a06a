package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"holon.dev/holon/journal"
)

// walkthrough is the README's five-minute walkthrough: its text, and its
// commands as the reader types them.
type walkthrough struct {
	text     string
	commands []string
}

// readWalkthrough reads the README's section "A five-minute walkthrough"
// and its shell blocks, one command per line, a quoted body spanning
// lines kept with its command.
func readWalkthrough(t *testing.T) walkthrough {
	t.Helper()
	b, err := os.ReadFile(moduleRoot + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## A five-minute walkthrough\n")
	if i < 0 {
		t.Fatal(`README.md has no section "A five-minute walkthrough"`)
	}
	s = s[i+1:]
	if j := strings.Index(s[3:], "\n## "); j >= 0 {
		s = s[:j+3]
	}
	w := walkthrough{text: s}
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(s, -1) {
		var cmd string
		for _, line := range strings.SplitAfter(m[1], "\n") {
			cmd += line
			if strings.Count(cmd, "'")%2 == 0 {
				if c := strings.TrimSpace(cmd); c != "" {
					w.commands = append(w.commands, c)
				}
				cmd = ""
			}
		}
	}
	if len(w.commands) < 8 {
		t.Fatalf("the walkthrough has %d commands: %q", len(w.commands), w.commands)
	}
	return w
}

// words splits a command line as a shell would (single quotes only),
// and gives back the comment after it.
func words(line string) (args []string, comment string) {
	var cur strings.Builder
	in, has := false, false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\'':
			in, has = !in, true
		case !in && (c == ' ' || c == '\t' || c == '\n'):
			if has {
				args = append(args, cur.String())
				cur.Reset()
				has = false
			}
		case !in && c == '#' && !has:
			return args, strings.TrimSpace(line[i+1:])
		default:
			cur.WriteByte(c)
			has = true
		}
	}
	if has {
		args = append(args, cur.String())
	}
	return args, ""
}

// answer is one curl command of the walkthrough and what the gateway
// answered it.
type answer struct {
	method, path, comment string
	status                int
	body                  map[string]any
}

// Ensure that the README's walkthrough runs as written: its first
// command starts the gateway (here on a free port and a temporary
// store), every curl command is sent as curl would send it, and the
// figures the README quotes are the gateway's: Alice's credit, the held
// call (its status and worst case), the approved run's receipt (own,
// downstream, total, its splits, its two children's costs), and the
// balances and the mandate's spent after it.
func TestReadme_Walkthrough(t *testing.T) {
	w := readWalkthrough(t)

	// The gateway, as the first command starts it.
	args, _ := words(w.commands[0])
	env := map[string]string{}
	for len(args) > 0 && strings.Contains(args[0], "=") {
		k, v, _ := strings.Cut(args[0], "=")
		env[k] = v
		args = args[1:]
	}
	if len(args) < 4 || strings.Join(args[:4], " ") != "go run ./cmd/holon serve" {
		t.Fatalf("the walkthrough's first command does not start the gateway: %q", w.commands[0])
	}
	flags := args[4:]
	for i := range flags {
		if flags[i] == "--db" && i+1 < len(flags) {
			flags[i+1] = filepath.Join(t.TempDir(), filepath.Base(flags[i+1]))
		}
	}
	rs := startServe(t, env, append(flags, "--addr", "127.0.0.1:0")...)
	base := "http://" + rs.addrs["api"]

	// Every curl command, in order.
	var answers []answer
	for _, c := range w.commands[1:] {
		args, comment := words(c)
		if len(args) == 0 || args[0] != "curl" {
			t.Fatalf("not a curl command: %q", c)
		}
		a := answer{method: "GET", comment: comment}
		var body string
		for i := 1; i < len(args); i++ {
			switch args[i] {
			case "-s":
			case "-X":
				i++
				a.method = args[i]
			case "-d":
				i++
				body = args[i]
			default:
				a.path = strings.TrimPrefix(args[i], "localhost:8080")
				if a.path == args[i] {
					t.Fatalf("%q: the URL is not on localhost:8080", c)
				}
			}
		}
		if body != "" && a.method == "GET" {
			a.method = "POST" // curl -d posts
		}
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(a.method, base+a.path, rd)
		if body != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded") // as curl -d sends it
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		a.status = resp.StatusCode
		if err := json.NewDecoder(resp.Body).Decode(&a.body); err != nil {
			t.Fatalf("%s %s: %d, not JSON: %v", a.method, a.path, a.status, err)
		}
		resp.Body.Close()
		if a.status >= 300 && a.status != http.StatusAccepted {
			t.Errorf("%s %s: %d %v", a.method, a.path, a.status, a.body)
		}
		answers = append(answers, a)
	}
	find := func(method, prefix string, nth int) answer {
		t.Helper()
		for _, a := range answers {
			if a.method == method && strings.HasPrefix(a.path, prefix) {
				if nth == 0 {
					return a
				}
				nth--
			}
		}
		t.Fatalf("the walkthrough has no %s %s", method, prefix)
		return answer{}
	}
	quoted := func(re string) []string {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(strings.Join(strings.Fields(w.text), " "))
		if m == nil {
			t.Fatalf("the walkthrough no longer says %s", re)
		}
		return m[1:]
	}
	amount := func(v any) journal.Amount {
		s, _ := v.(string)
		a, err := journal.ParseAmount(s)
		if err != nil {
			t.Errorf("%q is not an amount", s)
		}
		return a
	}
	same := func(what string, got any, want string) {
		t.Helper()
		if amount(got) != journal.MustParseAmount(want) {
			t.Errorf("%s: the gateway says %v, the README %s", what, got, want)
		}
	}
	balances := func(a answer) map[string]any {
		out := map[string]any{}
		list, _ := a.body["accounts"].([]any)
		for _, x := range list {
			m, _ := x.(map[string]any)
			out[m["account"].(string)] = m["balance"]
		}
		return out
	}
	obj := func(v any, keys ...string) map[string]any {
		m, _ := v.(map[string]any)
		for _, k := range keys {
			m, _ = m[k].(map[string]any)
		}
		return m
	}

	// Alice's credit before.
	same("Alice's starting credit", balances(find("GET", "/v0/accounts", 0))["alice"], quoted(`Alice starts with ([0-9.]+) EUR`)[0])

	// The held call.
	held := find("POST", "/v0/calls", 0)
	if want := quoted(`The call is held, with HTTP ([0-9]{3})`)[0]; want != "202" || held.status != http.StatusAccepted {
		t.Errorf("the call answered %d, the README says HTTP %s", held.status, want)
	}
	if s := obj(held.body, "receipt")["status"]; s != "pending_approval" {
		t.Errorf("the held call's status: %v", s)
	}
	same("the held call's worst case", obj(held.body, "approval")["worst_case"], quoted(`so its worst case is ([0-9.]+)`)[0])
	approve := find("POST", "/v0/approvals/", 0)
	if id := obj(held.body, "approval")["id"]; "/v0/approvals/"+id.(string) != approve.path {
		t.Errorf("the held call's approval is %v, the README approves %s", id, approve.path)
	}

	// The approved run.
	cost := quoted(`cost: \{own: ([0-9.]+), downstream: ([0-9.]+), total: ([0-9.]+)\}`)
	ran := obj(approve.body, "receipt")
	if ran["status"] != "succeeded" || ran["billed"] != true {
		t.Errorf("the approved run: %v", ran)
	}
	for i, k := range []string{"own", "downstream", "total"} {
		same("the run's "+k, obj(ran, "cost")[k], cost[i])
	}
	split := quoted("split `holon ([0-9.]+)`, `holon-labs ([0-9.]+)`")
	got := map[string]any{}
	splits, _ := ran["splits"].([]any)
	for _, s := range splits {
		got[obj(s)["to"].(string)] = obj(s)["amount"]
	}
	if len(got) != 2 {
		t.Errorf("the run's splits: %v", splits)
	}
	same("holon's split", got["holon"], split[0])
	same("holon-labs' split", got["holon-labs"], split[1])

	// The receipt's tree: the README's receipt, with its two children.
	tree := find("GET", "/v0/receipts/", 0)
	if id := obj(tree.body, "receipt")["id"]; "/v0/receipts/"+id.(string) != tree.path || id != ran["id"] {
		t.Errorf("the README reads %s, the run's receipt is %v", tree.path, ran["id"])
	}
	children := map[string]any{}
	kids, _ := tree.body["children"].([]any)
	for _, k := range kids {
		r := obj(k, "receipt")
		name, _, _ := strings.Cut(r["agent"].(string), "@")
		children[name] = obj(r, "cost")["total"]
	}
	same("text-tables' cost", children["holon-labs/text-tables"], quoted(`\(` + "`holon-labs/text-tables`" + `, [0-9.]+ per row: ([0-9.]+) for three rows\)`)[0])
	same("company-lookup's cost", children["holon-labs/company-lookup"], quoted("`holon-labs/company-lookup` \\(([0-9.]+)\\)")[0])

	// The money after it, as the comments say.
	after := find("GET", "/v0/accounts", 1)
	pairs := regexp.MustCompile(`([a-z-]+) ([0-9.]+)`).FindAllStringSubmatch(after.comment, -1)
	if len(pairs) != 3 {
		t.Fatalf("the comment on the balances after the run: %q", after.comment)
	}
	for _, p := range pairs {
		same(p[1]+"'s balance after the run", balances(after)[p[1]], p[2])
	}
	mandate := find("GET", "/v0/mandates/", 1)
	spent := regexp.MustCompile(`^spent ([0-9.]+)$`).FindStringSubmatch(mandate.comment)
	if spent == nil {
		t.Fatalf("the comment on the mandate after the run: %q", mandate.comment)
	}
	same("the mandate's spent", mandate.body["spent"], spent[1])
}
