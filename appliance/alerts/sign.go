package alerts

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// SignatureHeader carries a delivery's signature: "t=<unix seconds>,v1=<hex>",
// where v1 is HMAC-SHA256, keyed with the webhook's secret, of the
// timestamp, a ".", and the body as sent. EventHeader carries the alert's
// id, which the body holds too: a receiver that has seen it ignores it.
const (
	SignatureHeader = "Holon-Signature"
	EventHeader     = "Holon-Event-Id"
)

// sign is the value of SignatureHeader for body sent at t.
func sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}
