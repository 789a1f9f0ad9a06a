package remote

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The runner's MCP client: the client half of Streamable HTTP (stateful
// sessions, 2025-11-25 and the versions before it) reduced to what the
// Holon MCP agent profile uses, one tools/call at a time per session. It
// reads each answer on the calling goroutine, to its end, so that the
// connection goes back to the pool before the call returns; it decodes one
// message once, and keeps structuredContent as the tool wrote it. The Go
// SDK's client, used before, handed each message between goroutines and
// decoded four times per call with a fresh 32 KB buffer each: in holon
// bench's MCP row at 32 clients it took 11 % of the process's CPU, this
// client 6 %.

// mcpVersions are the protocol versions an agent may answer initialize
// with, newest first: the ones the Go SDK's client accepts from
// initialize.
var mcpVersions = []string{MCPProtocolVersion, "2025-06-18", "2025-03-26", "2024-11-05"}

// Header values every request of a session carries.
var (
	hdrJSON   = []string{"application/json"}
	hdrAccept = []string{"application/json, text/event-stream"}
)

// maxKeptBuffer bounds the buffer a session keeps between calls: a larger
// answer's buffer is dropped after its call.
const maxKeptBuffer = 64 << 10

// drainWait is how long a call waits, once it has its answer, for the
// rest of the response (the end of the SSE stream), so that the connection
// can be reused; a server that keeps the stream open longer has it cut.
const drainWait = 250 * time.Millisecond

// mcpSession is one MCP session with an agent's endpoint.
type mcpSession struct {
	endpoint string
	hc       *http.Client
	id       []string // Mcp-Session-Id, nil for a server without sessions
	version  []string // Mcp-Protocol-Version: the negotiated version
	nextID   atomic.Int64
	closed   atomic.Bool

	// Used by one call at a time (the pool hands a session to one call).
	br  *bufio.Reader
	buf bytes.Buffer
}

// rpcError is a JSON-RPC error object as it arrives.
type rpcError = jsonrpc.Error

// rpcMessage is one JSON-RPC message from the server: a response (ID and
// Result or Error), a request (ID and Method) or a notification (Method).
type rpcMessage[R any] struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result *R              `json:"result"`
	Error  *rpcError       `json:"error"`
}

type initializeResult struct {
	ProtocolVersion string `json:"protocolVersion"`
}

// toolResult is a tools/call result, as much of it as the profile reads.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
	Meta              struct {
		Units json.RawMessage `json:"holon/units"`
		Quote json.RawMessage `json:"holon/quote"`
	} `json:"_meta"`
	// InputRequests is how a tool asks for more input in 2026-07-28,
	// which the profile does not provide.
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
}

// toolParams are a tools/call request's params.
type toolParams struct {
	Meta      map[string]any  `json:"_meta,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// dialMCP opens a session: initialize, then notifications/initialized.
func dialMCP(ctx context.Context, endpoint string, hc *http.Client) (*mcpSession, error) {
	s := &mcpSession{endpoint: endpoint, hc: hc}
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"holon-gateway","version":"v0"}}}`, MCPProtocolVersion)
	var res initializeResult
	if err := roundTrip(ctx, s, "initialize", body, []byte("0"), &res, true); err != nil {
		return nil, err
	}
	if !slices.Contains(mcpVersions, res.ProtocolVersion) {
		s.Close()
		return nil, fmt.Errorf("unsupported protocol version: %q", res.ProtocolVersion)
	}
	s.version = []string{res.ProtocolVersion}
	if err := s.notify(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// callTool runs one tools/call. When ctx ends first, the server is told
// the request is cancelled (notifications/cancelled) and ctx's error is
// returned; the session stays usable.
func (s *mcpSession) callTool(ctx context.Context, p *toolParams) (*toolResult, error) {
	id := s.nextID.Add(1)
	var idb [20]byte
	idText := strconv.AppendInt(idb[:0], id, 10)
	params, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	body := make([]byte, 0, len(params)+64)
	body = append(body, `{"jsonrpc":"2.0","id":`...)
	body = append(body, idText...)
	body = append(body, `,"method":"tools/call","params":`...)
	body = append(body, params...)
	body = append(body, '}')
	res := new(toolResult)
	err = roundTrip(ctx, s, "tools/call", body, idText, res, false)
	if err != nil && ctx.Err() != nil {
		go s.notifyCancelled(id)
		return nil, ctx.Err()
	}
	return res, err
}

// notifyCancelled tells the server that request id is cancelled, so that
// its handler's context ends.
func (s *mcpSession) notifyCancelled(id int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.notify(ctx, fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"the call's hard timeout"}}`, id))
}

// notify sends a notification, or a response to a server's request.
func (s *mcpSession) notify(ctx context.Context, body []byte) error {
	resp, err := s.do(ctx, http.MethodPost, body)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return fmt.Errorf("%s answered a notification with %d %s", s.endpoint, resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return nil
}

// Close ends the session on the server (DELETE), when it has one.
func (s *mcpSession) Close() error {
	if s.closed.Swap(true) || s.id == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := s.do(ctx, http.MethodDelete, nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.Body.Close()
}

func (s *mcpSession) request(ctx context.Context, method string, body []byte) (*http.Request, error) {
	h := http.Header{"Accept": hdrAccept}
	if body != nil {
		h["Content-Type"] = hdrJSON
	}
	if s.id != nil {
		h["Mcp-Session-Id"] = s.id
	}
	if s.version != nil {
		h["Mcp-Protocol-Version"] = s.version
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.endpoint, rd)
	if err != nil {
		return nil, err
	}
	req.Header = h
	return req, nil
}

// do sends a request of the session.
func (s *mcpSession) do(ctx context.Context, method string, body []byte) (*http.Response, error) {
	req, err := s.request(ctx, method, body)
	if err != nil {
		return nil, err
	}
	return s.hc.Do(req)
}

// roundTrip posts a request and reads its answer, JSON or an SSE stream,
// into res. initialize reads the session's id from the answer.
func roundTrip[R any](ctx context.Context, s *mcpSession, method string, body, id []byte, res *R, initialize bool) error {
	// The request outlives ctx by up to drainWait once its answer is in,
	// so that reading the end of the response keeps the connection.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	resp, err := s.do(rctx, http.MethodPost, body)
	if err != nil {
		return fmt.Errorf("sending %q: %w", method, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		if resp.StatusCode == http.StatusNotFound && s.id != nil {
			// The server no longer knows the session: nothing to delete.
			s.closed.Store(true)
		}
		return s.statusError(method, resp)
	}
	if initialize {
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			s.id = []string{sid}
		}
	}
	got := false
	handle := func(data []byte) error {
		var m rpcMessage[R]
		if err := json.Unmarshal(data, &m); err != nil {
			return fmt.Errorf("%q: the answer is not JSON-RPC: %w", method, err)
		}
		switch {
		case m.Method != "" && len(m.ID) > 0:
			// A request from the server: the runner offers no client
			// features (sampling, elicitation, roots), so it answers ping
			// and refuses the rest.
			s.answer(m.ID, m.Method)
			return nil
		case m.Method != "" || !bytes.Equal(m.ID, id):
			return nil // a notification, or somebody else's answer
		case m.Error != nil:
			got = true
			return m.Error
		case m.Result == nil:
			got = true
			return fmt.Errorf("%q: the answer has neither result nor error", method)
		}
		got = true
		*res = *m.Result
		return nil
	}
	var herr error
	switch ct := mediaType(resp.Header.Get("Content-Type")); ct {
	case "application/json":
		s.buf.Reset()
		if _, err := s.buf.ReadFrom(resp.Body); err != nil {
			return fmt.Errorf("%q: reading the answer: %w", method, err)
		}
		herr = handle(s.buf.Bytes())
	case "text/event-stream":
		herr = s.readEvents(resp.Body, func(data []byte) (bool, error) {
			err := handle(data)
			return got, err
		})
	default:
		return fmt.Errorf("%q: the answer's content type %q is neither JSON nor an event stream", method, ct)
	}
	if s.buf.Cap() > maxKeptBuffer {
		s.buf = bytes.Buffer{}
	}
	if got {
		// The answer is in: the rest of the response may take drainWait.
		stop()
		t := time.AfterFunc(drainWait, cancel)
		_, _ = io.Copy(io.Discard, resp.Body)
		t.Stop()
		return herr
	}
	if herr != nil {
		return herr
	}
	return fmt.Errorf("%q: the response ended without an answer", method)
}

// answer answers a server's request: ping with an empty result, anything
// else with method not found.
// It is sent outside the call's context, whose probe records what became
// of the call's own request.
func (s *mcpSession) answer(id json.RawMessage, method string) {
	var body []byte
	if method == "ping" {
		body = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{}}`, id)
	} else {
		body = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, id, jsonrpc.CodeMethodNotFound, "the Holon gateway offers no "+method)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.notify(ctx, body)
}

// statusError is the error of a non-2xx answer, with the JSON-RPC error its
// body carries, if any.
func (s *mcpSession) statusError(method string, resp *http.Response) error {
	st := fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	if mediaType(resp.Header.Get("Content-Type")) == "application/json" {
		var m rpcMessage[json.RawMessage]
		if b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10)); err == nil && json.Unmarshal(b, &m) == nil && m.Error != nil {
			return fmt.Errorf("%q: %w (%s)", method, m.Error, st)
		}
	}
	return fmt.Errorf("%q: %s answered %s", method, s.endpoint, st)
}

// readEvents reads an SSE stream, handing each message event's data to
// fn until fn says it is done or the stream ends.
func (s *mcpSession) readEvents(body io.Reader, fn func(data []byte) (done bool, err error)) error {
	if s.br == nil {
		s.br = bufio.NewReaderSize(body, 4096)
	} else {
		s.br.Reset(body)
	}
	defer s.br.Reset(nil)
	s.buf.Reset()
	var line []byte
	name := false // the event has a name other than message
	dispatch := func() (bool, error) {
		data := s.buf.Bytes()
		skip := name || len(data) == 0
		name = false
		if skip {
			s.buf.Reset()
			return false, nil
		}
		done, err := fn(data[:len(data)-1]) // without the last newline
		s.buf.Reset()
		return done, err
	}
	for {
		l, err := s.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			line = append(line[:0], l...)
			for err == bufio.ErrBufferFull {
				l, err = s.br.ReadSlice('\n')
				line = append(line, l...)
			}
			l = line
		}
		if err != nil && !(err == io.EOF && len(l) > 0) {
			if err == io.EOF {
				if s.buf.Len() > 0 {
					_, ferr := dispatch()
					return ferr
				}
				return nil
			}
			return err
		}
		l = bytes.TrimSuffix(bytes.TrimSuffix(l, []byte("\n")), []byte("\r"))
		if len(l) == 0 {
			if done, err := dispatch(); done || err != nil {
				return err
			}
			continue
		}
		field, value, _ := bytes.Cut(l, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			s.buf.Write(value)
			s.buf.WriteByte('\n')
		case "event":
			name = len(value) > 0 && string(value) != "message"
		}
	}
}

// mediaType is a Content-Type's media type, without its parameters.
func mediaType(ct string) string {
	ct, _, _ = strings.Cut(ct, ";")
	ct = strings.TrimSpace(ct)
	if ct == "application/json" || ct == "text/event-stream" {
		return ct
	}
	return strings.ToLower(ct)
}
