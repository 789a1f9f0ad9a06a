package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"holon.dev/holon"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/gateway"
	"io"
	"log/slog"
	"net/http"
)

// MaxBody bounds a request body (a call's input included).
const MaxBody = 4 << 20

// ErrorBody is every error answer: {"error": {"code", "message", "fields"}}.
type ErrorBody struct {
	Error *holon.Error `json:"error"`
}

// JSON answers v as JSON with the status given.
func JSON(w http.ResponseWriter, status int, v any) {
	jsonHeader(w, status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// JSONBytes answers with b, a JSON value and its newline as JSON writes
// them, encoded by the caller.
func JSONBytes(w http.ResponseWriter, status int, b []byte) {
	jsonHeader(w, status)
	_, _ = w.Write(b)
}

func jsonHeader(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
}

// Error answers err with the status given; an error without a code
// the gateway's table knows is answered gateway_error, telling nothing of
// it. Most handlers want Fail, which takes the status from the table and
// logs internal errors.
func Error(w http.ResponseWriter, status int, err error) {
	ge, _, _ := Public(err)
	if status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="holon"`)
	}
	JSON(w, status, ErrorBody{Error: ge})
}

// Fail answers with the status of the error's code (Status). An
// internal error (no code, a code the table does not know, or
// gateway_error) is logged to log, once, with the request it failed; it
// is the only kind that is.
func Fail(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	ge, status, internal := Public(err)
	if internal {
		log.Error("request failed", "method", r.Method, "path", token.Redact(r.URL.Path), "err", err)
	}
	Error(w, status, ge)
}

// NotFound is the answer for a resource that does not exist and for one
// outside the principal's scope alike: nobody learns what others have.
func NotFound(format string, args ...any) error {
	return holon.Errorf(holon.CodeNotFound, format, args...)
}

// DecodeBody reads a JSON request body strictly (gateway.DecodeJSON: I-JSON,
// field names spelt exactly, no unknown field, nothing after the object);
// NUL characters and oversized bodies are refused too, each with a message
// that says what to fix.
func DecodeBody(r *http.Request, v any) error {
	b, err := ReadBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	return gateway.DecodeJSON(b, v, "body")
}

// ReadBody reads a bounded body with no NUL character in it.
func ReadBody(r *http.Request) ([]byte, error) {
	b, err := readAll(io.LimitReader(r.Body, MaxBody+1), r.ContentLength)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) || len(b) > MaxBody {
		return nil, holon.Errorf(CodeBodyTooLarge, "the body is larger than %d bytes", MaxBody)
	}
	if err != nil {
		return nil, holon.Errorf(holon.CodeInvalidRequest, "read body: %v", err)
	}
	if bytes.IndexByte(b, 0) >= 0 || bytes.Contains(b, []byte(`\u0000`)) {
		return nil, holon.Errorf(CodeNULCharacter, "NUL characters (raw or as \\u0000) are not accepted in a request body: remove them")
	}
	return b, nil
}

// readAll is io.ReadAll, its buffer sized for a body of length n when
// that is known (-1 when not): one allocation for most bodies, where
// io.ReadAll starts at 512 bytes and grows.
func readAll(r io.Reader, n int64) ([]byte, error) {
	if n < 0 || n > MaxBody {
		return io.ReadAll(r)
	}
	// One byte more, so that the read that finds the end needs no room.
	b := make([]byte, 0, n+1)
	for {
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			// Longer than it said (a body that is not the request's own):
			// the rest as io.ReadAll reads it.
			rest, err := io.ReadAll(r)
			return append(b, rest...), err
		}
	}
}

// Answer answers err with the status of its code (Status), as Fail does,
// for a handler with nothing to log to: an internal error is answered
// gateway_error, telling nothing of it, and not logged.
func Answer(w http.ResponseWriter, err error) {
	ge, status, _ := Public(err)
	Error(w, status, ge)
}

// MethodNotAllowed answers 405 invalid_request: the one status that is
// the route's, not an error code's.
func MethodNotAllowed(w http.ResponseWriter, format string, args ...any) {
	Error(w, http.StatusMethodNotAllowed, holon.Errorf(holon.CodeInvalidRequest, format, args...))
}
