package holon

import (
	"context"
	"errors"
	"io"
)

// StoredKey returns the 32-byte key kept in an app bucket under name (a
// key the gateway needs and its configuration does not give): the first
// gateway to ask makes it from rand and stores it, and every later asker
// reads it (another gateway on a shared store, the same gateway after a
// restart), so that what one of them signed or sealed with it opens on
// every other. Reading and making are one update: two gateways starting
// at once on one store agree on one key. The document is {"key": <its
// bytes>}; one that holds no 32-byte key is replaced.
func StoredKey(ctx context.Context, s Store, bucket, name string, rand io.Reader) ([]byte, error) {
	var key []byte
	err := s.Update(ctx, func(tx Tx) error {
		var k struct {
			Key []byte `json:"key"`
		}
		err := tx.Get(bucket, name, &k)
		if err == nil && len(k.Key) == 32 {
			key = k.Key
			return nil
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		k.Key = make([]byte, 32)
		if _, err := io.ReadFull(rand, k.Key); err != nil {
			return err
		}
		key = k.Key
		return tx.Put(bucket, name, k)
	})
	return key, err
}
