package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
)

// Ensure that FileHandles finds every handle among an input's strings, at
// any depth and however the JSON escapes it, once each, and nothing else.
func TestFileHandles(t *testing.T) {
	for _, c := range []struct {
		input string
		want  []string
	}{
		{`{"text": "no file here"}`, nil},
		{`{"file": "holon://files/b"}`, []string{"holon://files/b"}},
		{`{"a": ["holon://files/b", {"c": "holon://files/a"}], "d": "holon://files/b"}`, []string{"holon://files/a", "holon://files/b"}},
		{`{"file": "holon:\/\/files\/x"}`, []string{"holon://files/x"}},
		{`{"file": "\u0068olon://files/y"}`, []string{"holon://files/y"}},
		{`{"holon://files/key": "a key is not a value"}`, nil},
		{`{"text": "see holon://files/z"}`, nil},
		{`not json holon://files/q`, nil},
	} {
		if got := gateway.FileHandles(json.RawMessage(c.input)); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.input, got, c.want)
		}
	}
}

// Ensure that ReadFile returns the bytes when they have the declared size
// and SHA-256, and otherwise fails with the declared unreadable_document:
// a short file, a long one (read no further than one byte past the size),
// an altered one, a failed download.
func TestReadFile(t *testing.T) {
	doc := []byte("Widget, 2, 3.00\n")
	sum := sha256.Sum256(doc)
	link := func(body []byte, err error) gateway.FileLink {
		return gateway.FileLink{Size: int64(len(doc)), SHA256: hex.EncodeToString(sum[:]),
			Open: func(context.Context) (io.ReadCloser, error) {
				if err != nil {
					return nil, err
				}
				return io.NopCloser(bytes.NewReader(body)), nil
			}}
	}
	if got, err := gateway.ReadFile(context.Background(), link(doc, nil)); err != nil || !bytes.Equal(got, doc) {
		t.Errorf("the file itself: %q, %v", got, err)
	}
	for name, l := range map[string]gateway.FileLink{
		"truncated":       link(doc[:5], nil),
		"longer":          link(append(bytes.Clone(doc), strings.Repeat("x", 1<<20)...), nil),
		"altered":         link(bytes.ToUpper(doc), nil),
		"download failed": link(nil, errors.New("connection refused")),
		"no link":         {Size: 1, SHA256: "00"},
	} {
		_, err := gateway.ReadFile(context.Background(), l)
		var ae *gateway.AgentError
		if !errors.As(err, &ae) || ae.Code != holon.CodeUnreadableDocument {
			t.Errorf("%s: %v, want %s", name, err, holon.CodeUnreadableDocument)
		}
	}
}
