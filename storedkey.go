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
// every other. A key already there is read without a write; making one is
// one update that reads again first, so two gateways starting at once on
// one store agree on one key. The document is {"key": <its bytes>}; one
// that holds no 32-byte key is replaced.
func StoredKey(ctx context.Context, s Store, bucket, name string, rand io.Reader) ([]byte, error) {
	var key []byte
	err := s.View(func(tx Tx) error {
		var err error
		key, err = storedKey(tx, bucket, name)
		return err
	})
	if err != nil || key != nil {
		return key, err
	}
	err = s.Update(ctx, func(tx Tx) error {
		var err error
		if key, err = storedKey(tx, bucket, name); err != nil || key != nil {
			return err
		}
		key = make([]byte, 32)
		if _, err := io.ReadFull(rand, key); err != nil {
			return err
		}
		return tx.Put(bucket, name, storedKeyDoc{Key: key})
	})
	return key, err
}

// storedKeyDoc is the document that holds a stored key.
type storedKeyDoc struct {
	Key []byte `json:"key"`
}

// storedKey reads the key under name: nil when there is none (or none of
// 32 bytes).
func storedKey(tx Tx, bucket, name string) ([]byte, error) {
	var k storedKeyDoc
	err := tx.Get(bucket, name, &k)
	if errors.Is(err, ErrNotFound) || err == nil && len(k.Key) != 32 {
		return nil, nil
	}
	return k.Key, err
}
