package holon

import "errors"

// ErrNotFound is returned when a record does not exist.
var ErrNotFound = errors.New("not found")

// ErrClosed is returned by updates submitted after Close.
var ErrClosed = errors.New("store is closed")

// ErrBroken is returned by every update after a commit failed: the disk
// refused a write, and a later commit could land on top of pages it lost.
var ErrBroken = errors.New("store is broken: a commit failed")
