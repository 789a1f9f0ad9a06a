package ops

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"

	"holon.dev/holon/appliance/token"
)

// Redacted replaces a secret in a log line.
const Redacted = "[redacted]"

// accountKeyPattern matches a whole account key (hlk_h_… or hlk_a_…, then
// its base32 body). The 14-character prefix that names a key in listings
// and logs is not matched.
var accountKeyPattern = regexp.MustCompile(fmt.Sprintf(`hlk_[ah]_[a-z2-7]{%d}`, token.BodyLen))

// NewLogger returns the gateway's logger: JSON lines when asJSON (in
// production), text otherwise. Whatever the code logs, every
// message and attribute goes through a last guard that replaces the given
// secrets (the admin key, the file secret, API keys of the operator) and
// anything shaped like an account key with Redacted. Inputs and outputs
// are never handed to the logger in the first place.
func NewLogger(w io.Writer, asJSON bool, secrets ...string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	var h slog.Handler
	if asJSON {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	var keep []string
	for _, s := range secrets {
		// A short "secret" would redact ordinary words; production
		// refuses secrets under 32 characters anyway.
		if len(s) >= 8 {
			keep = append(keep, s)
		}
	}
	return slog.New(&redactor{next: h, secrets: keep})
}

// redactor is a slog.Handler that scrubs secrets out of the records it
// passes on.
type redactor struct {
	next    slog.Handler
	secrets []string
}

func (h *redactor) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *redactor) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.scrub(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *redactor) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = h.attr(a)
	}
	return &redactor{next: h.next.WithAttrs(clean), secrets: h.secrets}
}

func (h *redactor) WithGroup(name string) slog.Handler {
	return &redactor{next: h.next.WithGroup(name), secrets: h.secrets}
}

// attr scrubs one attribute: strings directly, groups member by member,
// and any other value through its printed form (an error's text, say),
// which replaces the value only when something had to be removed.
func (h *redactor) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.scrub(v.String()))
	case slog.KindGroup:
		g := v.Group()
		clean := make([]slog.Attr, len(g))
		for i, m := range g {
			clean[i] = h.attr(m)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(clean...)}
	case slog.KindAny:
		s := fmt.Sprint(v.Any())
		if c := h.scrub(s); c != s {
			return slog.String(a.Key, c)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func (h *redactor) scrub(s string) string {
	for _, secret := range h.secrets {
		if strings.Contains(s, secret) {
			s = strings.ReplaceAll(s, secret, Redacted)
		}
	}
	if strings.Contains(s, "hlk_") {
		s = accountKeyPattern.ReplaceAllString(s, Redacted)
	}
	return s
}
