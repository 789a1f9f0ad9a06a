package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
)

// Files (gateway.md §7 "Files"): a call's input carries handles,
// holon://files/<id>; before an agent runs, the engine asks its FileStore
// for a link to each, on behalf of the issuer of the root mandate the call
// runs under (through every level of delegation). One handle the issuer
// may not pass and the call fails file_not_found, unbilled, before the
// agent sees anything. The links reach the agent in its Invocation: MCP
// agents in _meta["holon/files"], webhook agents in the x-holon-files
// header, dev agents through Ctx.Download.

// FileHandlePrefix starts every file handle.
const FileHandlePrefix = "holon://files/"

// FileLink is what an agent receives for one handle: the gateway.md §6 row
// of _meta["holon/files"].
type FileLink struct {
	// URL is a signed download link, bound to this one file.
	URL string `json:"url"`
	// ContentType is the type declared at upload.
	ContentType string `json:"content_type"`
	// Size is the exact number of bytes to expect.
	Size int64 `json:"size"`
	// SHA256 is the hex SHA-256 of those bytes.
	SHA256 string `json:"sha256"`
	// Expires is when the link stops working.
	Expires time.Time `json:"expires"`
	// Open, when set, reads the bytes without going through URL (a dev
	// agent inside the gateway, an agent host that fetches the URL itself).
	Open func(ctx context.Context) (io.ReadCloser, error) `json:"-"`
}

// FileStore resolves the file handles of a call's input.
type FileStore interface {
	// Links returns a link for each handle (by handle), for a run whose
	// root mandate was issued by account. An evaluation run may also read
	// platform files. When any handle is not one account may pass, whatever
	// the reason (no such file, expired, someone else's), it returns an
	// *Error with CodeFileNotFound whose message says nothing of which.
	Links(ctx context.Context, account string, handles []string, evaluation bool) (map[string]FileLink, error)
}

type evaluationKey struct{}

// WithEvaluation marks the calls made under ctx as an evaluation's: their
// runs may read platform files (evaluation fixtures), which no ordinary
// call can pass. Only the evaluation runner, inside the process, sets it.
func WithEvaluation(ctx context.Context) context.Context {
	return context.WithValue(ctx, evaluationKey{}, true)
}

// IsEvaluation reports whether ctx carries WithEvaluation.
func IsEvaluation(ctx context.Context) bool {
	v, _ := ctx.Value(evaluationKey{}).(bool)
	return v
}

// FileHandles lists the distinct holon://files/ handles among the string
// values of a JSON document (at any depth, however escaped), sorted.
func FileHandles(input json.RawMessage) []string {
	if !bytes.Contains(input, []byte(FileHandlePrefix)) && !bytes.Contains(input, []byte(`\u`)) && !bytes.Contains(input, []byte(`\/`)) {
		// No handle, and no escape that could spell one (\/, \u0068…):
		// most inputs are not parsed again.
		return nil
	}
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if strings.HasPrefix(x, FileHandlePrefix) && !seen[x] {
				seen[x] = true
				out = append(out, x)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	sort.Strings(out)
	return out
}

// fileLinks resolves the handles of a run's input for the root mandate's
// issuer; ok is false, with the run's result, when the call must fail.
func (e *Engine) fileLinks(ctx context.Context, input json.RawMessage, account string) (map[string]FileLink, RunResult, bool) {
	handles := FileHandles(input)
	if len(handles) == 0 {
		return nil, RunResult{}, true
	}
	notFound := func(msg string) (map[string]FileLink, RunResult, bool) {
		return nil, RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeFileNotFound}, Message: msg}, false
	}
	if e.files == nil {
		return notFound(fmt.Sprintf("no file %s: this gateway keeps no files", handles[0]))
	}
	links, err := e.files.Links(ctx, account, handles, IsEvaluation(ctx))
	var ge *holon.Error
	switch {
	case errors.As(err, &ge) && ge.Code == holon.CodeFileNotFound:
		return notFound(ge.Msg)
	case err != nil:
		return nil, RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeGatewayError}, Message: "reading files: " + err.Error()}, false
	}
	return links, RunResult{}, true
}

// ReadFile downloads a linked file and checks it: it stops reading past the
// declared size, and compares the SHA-256 of what it read with the
// declared one. A failed download, a short or long file, or another hash
// is a *AgentError with CodeUnreadableDocument (a declared error for the
// agents that read files).
func ReadFile(ctx context.Context, link FileLink) ([]byte, error) {
	unreadable := func(format string, args ...any) error {
		return &AgentError{Code: holon.CodeUnreadableDocument, Message: fmt.Sprintf(format, args...)}
	}
	if link.Open == nil {
		return nil, unreadable("the file has no link to download it from")
	}
	if link.Size < 0 {
		return nil, unreadable("the declared size %d is not a size", link.Size)
	}
	rc, err := link.Open(ctx)
	if err != nil {
		return nil, unreadable("download failed: %v", err)
	}
	defer rc.Close()
	buf := bytes.NewBuffer(make([]byte, 0, min(link.Size, 64<<20)+1))
	n, err := io.Copy(buf, io.LimitReader(rc, link.Size+1))
	switch {
	case err != nil:
		return nil, unreadable("download failed after %d bytes: %v", n, err)
	case n > link.Size:
		return nil, unreadable("the file is longer than its declared %d bytes", link.Size)
	case n < link.Size:
		return nil, unreadable("the file is truncated: %d bytes arrived, %d were declared", n, link.Size)
	}
	sum := sha256.Sum256(buf.Bytes())
	if got := hex.EncodeToString(sum[:]); !strings.EqualFold(got, link.SHA256) {
		return nil, unreadable("the file was altered: its SHA-256 is %s, %s was declared", got, link.SHA256)
	}
	return buf.Bytes(), nil
}

// Download fetches the file of a handle in the run's input, checked as
// ReadFile checks it. A handle the run was given no link for fails the
// same way: return the error, and the run ends with the declared
// unreadable_document.
func (c *Ctx) Download(ctx context.Context, handle string) ([]byte, error) {
	link, ok := c.inv.Files[handle]
	if !ok {
		return nil, &AgentError{Code: holon.CodeUnreadableDocument, Message: fmt.Sprintf("no link was given for %s", handle)}
	}
	return ReadFile(ctx, link)
}
