// Package web is the HTTP plumbing every room of the appliance answers
// through: JSON and error writing, the one table of the HTTP statuses of
// every error code (the gateway's and the product's), strict body
// decoding, the `limit` of a listing, and the registrar through which
// each room mounts its routes and the composition root lists them.
//
// It may import the domain (holon), journal and the engine's JSON decoder
// (gateway), and token (to keep secrets out of what it logs); never
// another room of the appliance.
package web
