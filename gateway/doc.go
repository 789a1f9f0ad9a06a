// Package gateway is Holon's engine: the call lifecycle (admission, the
// reservation, the run, settlement), approvals, delegation, the registry of
// agent versions, durability, Try, files, earnings, the dev runtime, and
// the Runner interface every runtime implements. It knows nothing of HTTP.
//
// It imports the domain package (holon: records, the store interface, the
// coded Error), journal and the rooms below it: the contracts
// (gateway/contract), the strict JSON reader (gateway/canonical) and the
// version arithmetic (gateway/semver). It never imports the remote runtimes
// (gateway/remote, which import it) nor a store implementation (kv): the
// wiring hands it a holon.Store and its runners.
package gateway
