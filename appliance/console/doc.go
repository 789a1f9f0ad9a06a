// Package console is the console's backend: it mounts the console's pages
// (webui) at /console and serves them as a client of the API. Every read
// and write of a page is one API request sent in-process through the
// gateway's front door (its NUL, host and body checks, its log line), the
// router, the route's access rule and the handler, exactly as a request
// from outside, as the principal of the browser's console session; the
// API's answers decode into the same types the handlers encode
// (appliance/wire, gateway's). It also adds the two API routes only the
// console needed: a dev gateway's mandates and the store's health.
//
// It may import the domain (holon), the engine (gateway), the console's
// pages (webui), and of the appliance the HTTP plumbing (web), the
// principal (auth), the origin rule (origin), ops (the count of open
// holds) and files (the bound of an upload); never the composition root, which hands it the front door, the
// console sessions (Sessions) and the mandates' reader.
package console
