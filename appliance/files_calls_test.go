package appliance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
)

// Ensure that a call can pass only files of the issuer of its root
// mandate: another account's handle fails file_not_found, unbilled,
// called directly and through two levels of delegation, with the very
// answer a handle that never existed gets; the owner's own handle works
// at every depth.
func TestFiles_OwnerOnly(t *testing.T) {
	fa := newFilesApp(t)
	ann, bob := fa.signup("ann"), fa.signup("bob")
	mandate := filesMandate(ann)
	doc := []byte("Invoice 7\nWidget, 2, 3.00\n")
	mine := ann.human.mustUpload("text/plain", doc)
	bobs := bob.human.mustUpload("text/plain", doc)
	never := "holon://files/0123456789abcdef01234567"

	// The owner's file, directly and two levels down.
	ref := func(h string) map[string]any {
		return map[string]any{"ref": strings.TrimPrefix(h, gateway.FileHandlePrefix)}
	}
	for agent, input := range map[string]map[string]any{
		"holon-labs/text-tables": {"file": mine},
		"test-lab/outer":         ref(mine),
	} {
		status, out := ann.human.callWith(mandate, agent, input)
		output, _ := out["output"].(map[string]any)
		rows, _ := output["rows"].([]any)
		if status != http.StatusOK || len(rows) != 1 {
			t.Fatalf("%s with ann's file: %d %v", agent, status, out)
		}
	}
	balance := ann.balance()
	type refusal struct {
		status int
		code   string
		msg    string
	}
	refusalOf := func(handle string, status int, out map[string]any) refusal {
		e, _ := out["error"].(map[string]any)
		return refusal{status, str(e["code"]), strings.ReplaceAll(str(e["message"]), handle, "<handle>")}
	}
	// Directly: the receipt is failed/file_not_found, unbilled.
	status, out := ann.human.callWith(mandate, "holon-labs/text-tables", map[string]any{"file": bobs})
	direct := refusalOf(bobs, status, out)
	if r := receiptOf(out); direct.status != http.StatusNotFound || direct.code != "file_not_found" ||
		r["status"] != "failed" || r["error"] != "file_not_found" || r["billed"] != false {
		t.Fatalf("bob's file, directly: %d %v", status, out)
	}
	status, out = ann.human.callWith(mandate, "holon-labs/text-tables", map[string]any{"file": never})
	if got := refusalOf(never, status, out); got != direct {
		t.Errorf("a handle that never existed answers %+v, another account's %+v: the answers tell them apart", got, direct)
	}
	// Through two levels: test-lab/inner, under ann's mandate, writes bob's
	// handle into its call; the leaf's receipt says file_not_found, unbilled.
	status, out = ann.human.callWith(mandate, "test-lab/outer", ref(bobs))
	if status != http.StatusBadGateway || !strings.Contains(str(out["error"]), "file_not_found") {
		t.Fatalf("bob's file two levels down: %d %v", status, out)
	}
	tree := ann.human.must(http.StatusOK, "GET", "/v0/receipts/"+str(receiptOf(out)["id"]), nil)
	inner := tree["children"].([]any)[0].(map[string]any)
	leaf := inner["children"].([]any)[0].(map[string]any)["receipt"].(map[string]any)
	if leaf["agent"] != "holon-labs/text-tables@1.0.0" || leaf["error"] != "file_not_found" || leaf["billed"] != false {
		t.Errorf("the leaf of the tree: %v", leaf)
	}
	if got := ann.balance(); got != balance {
		t.Errorf("ann's balance went from %s to %s: refused files were billed", balance, got)
	}
	// Bob cannot pass ann's either, with an agent key.
	status, out = bob.agent.callWith("", "holon-labs/text-tables", map[string]any{"file": mine})
	if refusalOf(mine, status, out) != direct {
		t.Errorf("ann's file under bob's sandbox: %d %v", status, out)
	}
}

// Ensure that evaluation fixtures are platform files: no caller can pass
// one (file_not_found, the same answer as for any other file that is not
// theirs), and a run under gateway.WithEvaluation reads it.
func TestFiles_PlatformFiles(t *testing.T) {
	fa := newFilesApp(t)
	ann := fa.signup("ann")
	mandate := filesMandate(ann)
	fixture, err := fa.app.PutPlatformFile(context.Background(), "text/plain", strings.NewReader("Hidden case\nBolt, 9, 0.10\n"))
	if err != nil {
		t.Fatal(err)
	}
	status, out := ann.human.callWith(mandate, "holon-labs/text-tables", map[string]any{"file": fixture})
	if status != http.StatusNotFound || errorCode(out) != "file_not_found" || receiptOf(out)["billed"] != false {
		t.Errorf("a caller passing a platform file: %d %v", status, out)
	}
	res, err := fa.app.Engine().Call(gateway.WithEvaluation(context.Background()), gateway.CallInput{
		Mandate: mandate, Agent: "holon-labs/text-tables", Input: json.RawMessage(`{"file":"` + fixture + `"}`)})
	if err != nil || res.Receipt.Status != holon.StatusSucceeded || !strings.Contains(string(res.Output), "Bolt") {
		t.Errorf("an evaluation run with the fixture: %v %+v %s %s", err, res.Receipt, res.Output, res.Message)
	}
	// Platform files do not expire with uploads.
	fa.advance(48 * time.Hour)
	if _, err := fa.app.SweepFiles(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err = fa.app.Engine().Call(gateway.WithEvaluation(context.Background()), gateway.CallInput{
		Mandate: mandate, Agent: "holon-labs/text-tables", Input: json.RawMessage(`{"file":"` + fixture + `"}`)})
	if err != nil || res.Receipt.Status != holon.StatusSucceeded {
		t.Errorf("the fixture two days on: %v %+v", err, res.Receipt)
	}
}

// Ensure that a webhook agent gets a signed link per handle in
// x-holon-files, which serves the file with no key, as an attachment with
// nosniff and a sandboxing CSP, ranges included; and that a link with
// another file's id, a changed exp or a changed signature, or used after
// 15 minutes, is refused.
func TestFiles_SignedLinks(t *testing.T) {
	hook := newHookRecorder(t)
	fa := newFilesApp(t, withHook(t, hook))
	ann := fa.signup("ann")
	mandate := filesMandate(ann)
	doc := []byte("%PDF-1.7 not really, but kept as declared\n")
	h1 := ann.human.mustUpload("application/pdf", doc)
	h2 := ann.human.mustUpload("text/plain", []byte("the other file"))
	if status, out := ann.human.callWith(mandate, "test-lab/hook", map[string]any{"doc": h1, "more": []any{h2}}); status != http.StatusOK {
		t.Fatalf("call: %d %v", status, out)
	}
	links := hook.last()
	l1, l2 := links[h1], links[h2]
	if len(links) != 2 || l1.Size != int64(len(doc)) || l1.SHA256 != sha256Hex(doc) || l1.ContentType != "application/pdf" ||
		!l1.Expires.Equal(fa.clock.Now().Add(15*time.Minute)) || !strings.HasPrefix(l1.URL, fa.cfg.PublicURL+"/v0/files/") {
		t.Fatalf("links: %+v", links)
	}
	get := func(url string, header ...string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, body := get(l1.URL)
	id1 := strings.TrimPrefix(h1, gateway.FileHandlePrefix)
	for k, want := range map[string]string{
		"Content-Type":            "application/pdf",
		"Content-Disposition":     `attachment; filename="` + id1 + `"`,
		"X-Content-Type-Options":  "nosniff",
		"Content-Security-Policy": "sandbox; default-src 'none'; frame-ancestors 'none'",
		"Content-Length":          "42",
		"Accept-Ranges":           "bytes",
		"Cache-Control":           "private, no-store",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, doc) {
		t.Errorf("download: %d %q", resp.StatusCode, body)
	}
	if resp, body := get(l1.URL, "Range", "bytes=1-3"); resp.StatusCode != http.StatusPartialContent || string(body) != "PDF" ||
		resp.Header.Get("Content-Range") != "bytes 1-3/42" {
		t.Errorf("range: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	id2 := strings.TrimPrefix(h2, gateway.FileHandlePrefix)
	query := l1.URL[strings.IndexByte(l1.URL, '?'):]
	exp := l1.Expires.Unix()
	for name, url := range map[string]string{
		"another file's id":     fa.cfg.PublicURL + "/v0/files/" + id2 + query,
		"a later exp":           strings.Replace(l1.URL, "exp="+itoa(exp), "exp="+itoa(exp+3600), 1),
		"an earlier exp":        strings.Replace(l1.URL, "exp="+itoa(exp), "exp="+itoa(exp-1), 1),
		"a changed signature":   l1.URL[:len(l1.URL)-2] + "AA",
		"no signature":          fa.cfg.PublicURL + "/v0/files/" + id1 + "?exp=" + itoa(exp),
		"the other link's sig":  fa.cfg.PublicURL + "/v0/files/" + id1 + l2.URL[strings.IndexByte(l2.URL, '?'):],
		"a signature in base64": strings.Replace(l1.URL, "sig=", "sig=%2B", 1),
	} {
		if resp, body := get(url); resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `"invalid_link"`) {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
	fa.advance(15*time.Minute - time.Second)
	if resp, _ := get(l2.URL); resp.StatusCode != http.StatusOK {
		t.Errorf("a second before the link expires: %d", resp.StatusCode)
	}
	fa.advance(time.Second)
	if resp, body := get(l2.URL); resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "expired") {
		t.Errorf("after 15 minutes: %d %s", resp.StatusCode, body)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
