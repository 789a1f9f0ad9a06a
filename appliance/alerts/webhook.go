package alerts

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway/remote"
)

// The refusals of a webhook's URL (the same codes as an agent's
// endpoint's, in the status table).
const (
	CodeNotHTTPS      = "endpoint_not_https"
	CodeNotPublic     = "endpoint_not_public"
	CodeUnresolvable  = "endpoint_unresolvable"
	labelWebhook      = "holon webhook secrets"
	secretPrefix      = "whsec_"
	maxWebhookURLSize = 2048
)

func view(h *holon.Webhook, secret string) wire.WebhookView {
	return wire.WebhookView{Account: h.Account, URL: h.URL, Created: h.Created, Secret: secret}
}

// checkURL refuses a webhook URL that is not absolute https (http too when
// private endpoints are allowed, for local development), that carries
// credentials or a fragment, or whose host resolves to an address the
// network guard refuses.
func (s *Service) checkURL(ctx context.Context, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return nil, holon.Errorf(holon.CodeInvalidRequest, "url: required: where the gateway POSTs each alert, such as https://hooks.example.com/holon")
	case len(raw) > maxWebhookURLSize:
		return nil, holon.Errorf(holon.CodeInvalidRequest, "url: at most %d bytes", maxWebhookURLSize)
	case err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "":
		return nil, holon.Errorf(holon.CodeInvalidRequest, "url: %q is not an absolute URL such as https://hooks.example.com/holon", raw)
	case u.User != nil:
		return nil, holon.Errorf(holon.CodeInvalidRequest, "url: must not carry credentials: the signature is how your receiver knows the gateway")
	case u.Fragment != "":
		return nil, holon.Errorf(holon.CodeInvalidRequest, "url: must not have a #fragment")
	case u.Scheme != "https" && !(u.Scheme == "http" && s.guard.AllowPrivate):
		return nil, holon.Errorf(CodeNotHTTPS, "url: %q must be https (http only on a gateway that allows private endpoints)", raw)
	}
	if !s.guard.AllowPrivate {
		if err := s.guard.CheckHost(ctx, u.Hostname()); err != nil {
			var blocked *remote.BlockedAddressError
			if errors.As(err, &blocked) {
				return nil, holon.Errorf(CodeNotPublic, "url: %v: webhooks are delivered to public addresses only", err)
			}
			return nil, holon.Errorf(CodeUnresolvable, "url: %v", err)
		}
	}
	return u, nil
}

// newSecret draws a signing secret: whsec_ and 32 random bytes.
func (s *Service) newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := io.ReadFull(s.rand, b); err != nil {
		return "", fmt.Errorf("draw a webhook secret: %w", err)
	}
	return secretPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// sealer seals webhook secrets under a key derived from the gateway's
// secret (HOLON_FILE_SECRET), bound to the account; nil without one (a
// dev gateway), and the secret is then kept as it is.
func newSealer(secret []byte) (cipher.AEAD, error) {
	if len(secret) == 0 {
		return nil, nil
	}
	block, err := aes.NewCipher(token.DeriveKey(secret, labelWebhook))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// seal stores secret in h: sealed when the gateway can, else as it is.
func (s *Service) seal(h *holon.Webhook, secret string) error {
	if s.aead == nil {
		h.Secret = secret
		return nil
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := io.ReadFull(s.rand, nonce); err != nil {
		return fmt.Errorf("draw a nonce: %w", err)
	}
	h.Nonce, h.Sealed = nonce, s.aead.Seal(nil, nonce, []byte(secret), []byte(h.Account))
	return nil
}

// open is h's secret, false when it does not open (the gateway's secret
// changed: the account sets its webhook again).
func (s *Service) open(h *holon.Webhook) (string, bool) {
	if len(h.Sealed) == 0 {
		return h.Secret, strings.HasPrefix(h.Secret, secretPrefix)
	}
	if s.aead == nil {
		return "", false
	}
	b, err := s.aead.Open(nil, h.Nonce, h.Sealed, []byte(h.Account))
	return string(b), err == nil
}

// SetWebhook makes or replaces an account's webhook, with a new secret,
// and returns the view that shows the secret (once).
func (s *Service) SetWebhook(ctx context.Context, account, rawURL string) (wire.WebhookView, error) {
	u, err := s.checkURL(ctx, rawURL)
	if err != nil {
		return wire.WebhookView{}, err
	}
	secret, err := s.newSecret()
	if err != nil {
		return wire.WebhookView{}, err
	}
	h := &holon.Webhook{Account: account, URL: u.String(), Created: s.now().UTC()}
	if err := s.seal(h, secret); err != nil {
		return wire.WebhookView{}, err
	}
	if err := s.store.Update(ctx, func(tx holon.Tx) error { return tx.Put(holon.BucketWebhooks, account, h) }); err != nil {
		return wire.WebhookView{}, err
	}
	return view(h, secret), nil
}

// Webhook reads an account's webhook (not_found when it has none).
func (s *Service) Webhook(account string) (*holon.Webhook, error) {
	h := new(holon.Webhook)
	err := s.store.View(func(tx holon.Tx) error { return tx.Get(holon.BucketWebhooks, account, h) })
	if errors.Is(err, holon.ErrNotFound) {
		return nil, holon.Errorf(holon.CodeNotFound, "%s has no webhook: set one with PUT /v0/webhook {\"url\": \"https://…\"}", account)
	}
	return h, err
}

// DeleteWebhook removes an account's webhook: deliveries still pending
// are given up when they come due.
func (s *Service) DeleteWebhook(ctx context.Context, account string) error {
	if _, err := s.Webhook(account); err != nil {
		return err
	}
	return s.store.Update(ctx, func(tx holon.Tx) error { return tx.Delete(holon.BucketWebhooks, account) })
}
