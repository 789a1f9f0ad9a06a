// Package contract holds Holon's two contracts and the decisions made on
// them alone: the manifest an agent version publishes (Manifest,
// ParseManifest: interface, pricing, runtime, data policy, license,
// lineage) and the mandate that lets a caller spend (Mandate,
// ParseMandate), with their strict YAML/JSON decoding, JSON Schemas,
// agent and capability patterns, admission (CheckCall, CheckListing),
// attenuation of sub-mandates (CheckAttenuation, DeriveSubMandate) and
// billing (DecideBilling, Bill) (spec/manifest.md, spec/mandate.md).
//
// Its functions read no clock and no store: what they decide on is given.
// It imports the domain package (holon, for the coded Error), journal (the
// money) and gateway/semver, and nothing else of the project: never the
// engine (package gateway), the runtimes or a store.
package contract
