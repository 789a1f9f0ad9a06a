package alerts

import (
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway/remote"
)

// Config is what the room is wired with.
type Config struct {
	Store holon.Store
	// Guard is the network policy of remote agents, which deliveries
	// follow (no private address unless private endpoints are allowed).
	Guard remote.NetGuard
	// Secret is the gateway's own secret (HOLON_FILE_SECRET), which seals
	// the webhooks' secrets; empty, they are kept as they are.
	Secret []byte
	// RootCAs, when set, are the CAs a webhook's certificate is checked
	// against (tests); the system's otherwise.
	RootCAs  *x509.CertPool
	Settings Settings
	Now      func() time.Time
	Rand     io.Reader
	Log      *slog.Logger
}

// Service keeps the webhooks and delivers the alerts.
type Service struct {
	store    holon.Store
	guard    remote.NetGuard
	aead     cipher.AEAD
	client   *http.Client
	settings Settings
	now      func() time.Time
	rand     io.Reader
	log      *slog.Logger
	wake     chan struct{}
}

// sendTimeout bounds one delivery, connection included.
const sendTimeout = 10 * time.Second

// New makes the room's service.
func New(cfg Config) (*Service, error) {
	aead, err := newSealer(cfg.Secret)
	if err != nil {
		return nil, fmt.Errorf("webhook secrets: %w", err)
	}
	s := &Service{store: cfg.Store, guard: cfg.Guard, aead: aead, settings: cfg.Settings.withDefaults(),
		now: cfg.Now, rand: cfg.Rand, log: cfg.Log, wake: make(chan struct{}, 1)}
	g := &s.guard
	s.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil, // the guard must see the address dialled
			DialContext:           g.DialContext,
			TLSClientConfig:       &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout:   sendTimeout,
			ResponseHeaderTimeout: sendTimeout,
			MaxIdleConns:          16,
			IdleConnTimeout:       30 * time.Second,
		},
		Timeout:       sendTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return s, nil
}

// Wake tells the worker that alerts were recorded (the engine's
// OnAlerts): it looks for due deliveries at once.
func (s *Service) Wake([]*holon.Alert) {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run delivers due alerts until ctx ends: at once, whenever woken, and
// every Settings.Poll.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(s.settings.Poll)
	defer t.Stop()
	for {
		if _, err := s.DeliverDue(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("deliver alerts", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
		}
	}
}

// Event is the body of a delivery.
type Event struct {
	// ID is the alert's id: the same alert delivered twice has the same.
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Created time.Time    `json:"created"`
	Alert   *holon.Alert `json:"alert"`
}

// EventType is the type of every delivery.
const EventType = "budget.alert"

// maxBatch bounds the deliveries one pass sends.
const maxBatch = 100

// DeliverDue sends every delivery that is due, one at a time, and records
// what became of each: delivered (a 2xx answer), retried later, or given
// up once the retry time passed. It returns how many were delivered.
func (s *Service) DeliverDue(ctx context.Context) (int, error) {
	now := s.now()
	var due []*holon.Delivery
	err := s.store.View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketAlertOutbox, holon.OutboxKey(holon.DeliveryPending, ""), func(key string, raw json.RawMessage) (bool, error) {
			d := new(holon.Delivery)
			if err := json.Unmarshal(raw, d); err != nil {
				return false, fmt.Errorf("delivery %s: %w", key, err)
			}
			if !d.Next.After(now) {
				due = append(due, d)
			}
			return len(due) < maxBatch, nil
		})
	})
	if err != nil {
		return 0, err
	}
	delivered := 0
	for _, d := range due {
		if ctx.Err() != nil {
			return delivered, nil
		}
		ok, err := s.deliver(ctx, d)
		if err != nil {
			return delivered, err
		}
		if ok {
			delivered++
		}
	}
	return delivered, nil
}

// deliver sends one delivery and records the outcome.
func (s *Service) deliver(ctx context.Context, d *holon.Delivery) (bool, error) {
	var a holon.Alert
	var hook holon.Webhook
	hookErr := error(nil)
	err := s.store.View(func(tx holon.Tx) error {
		if err := tx.Get(holon.BucketAlerts, d.Alert, &a); err != nil {
			return fmt.Errorf("alert %s: %w", d.Alert, err)
		}
		hookErr = tx.Get(holon.BucketWebhooks, d.Account, &hook)
		if errors.Is(hookErr, holon.ErrNotFound) {
			return nil
		}
		return hookErr
	})
	if err != nil {
		return false, err
	}
	var sendErr error
	switch secret, opens := s.open(&hook); {
	case hookErr != nil:
		return false, s.finish(ctx, d, holon.DeliveryFailed, "the account removed its webhook")
	case !opens:
		sendErr = errors.New("the webhook's secret does not open with this gateway's HOLON_FILE_SECRET: set the webhook again")
	default:
		d.URL = hook.URL
		sendErr = s.send(ctx, hook.URL, secret, &a)
	}
	d.Attempts++
	if sendErr == nil {
		return true, s.finish(ctx, d, holon.DeliveryDelivered, "")
	}
	if ctx.Err() != nil {
		return false, nil // stopping: the attempt is not counted
	}
	deadline := d.Created.Add(s.settings.RetryFor)
	now := s.now()
	if !now.Before(deadline) {
		return false, s.finish(ctx, d, holon.DeliveryFailed, sendErr.Error())
	}
	// The last attempt is at the deadline itself.
	d.Next, d.LastError = now.Add(s.settings.backoff(d.Attempts)), sendErr.Error()
	if d.Next.After(deadline) {
		d.Next = deadline
	}
	return false, s.store.Update(ctx, func(tx holon.Tx) error {
		return tx.Put(holon.BucketAlertOutbox, holon.OutboxKey(holon.DeliveryPending, d.Alert), d)
	})
}

// finish moves a delivery out of the pending ones, as delivered or failed.
func (s *Service) finish(ctx context.Context, d *holon.Delivery, status, why string) error {
	done := s.now().UTC()
	d.Status, d.Done, d.LastError = status, &done, why
	return s.store.Update(ctx, func(tx holon.Tx) error {
		if err := tx.Delete(holon.BucketAlertOutbox, holon.OutboxKey(holon.DeliveryPending, d.Alert)); err != nil {
			return err
		}
		return tx.Put(holon.BucketAlertOutbox, holon.OutboxKey(status, d.Alert), d)
	})
}

// send POSTs the alert's event to url, signed with secret: delivered when
// the receiver answers 2xx.
func (s *Service) send(ctx context.Context, url, secret string, a *holon.Alert) error {
	body, err := json.Marshal(Event{ID: a.ID, Type: EventType, Created: a.Created, Alert: a})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Holon-Webhook/1")
	req.Header.Set(EventHeader, a.ID)
	req.Header.Set(SignatureHeader, sign(secret, s.now(), body))
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the webhook answered %s", resp.Status)
	}
	return nil
}
