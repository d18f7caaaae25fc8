// Package vault seals and opens connection secrets (D18, the SPEC-0028
// stand-in) with AES-256-GCM under the operator key SWITCHBOARD_SECRET_KEY.
//
// Every sealed value is bound to its connection row: the associated data is
// the row id (8 bytes, big-endian) followed by the row's owner scope
// ("human:<id>" or "team:<id>"), so a sealed value copied to another row, or
// a row moved to another scope, no longer opens. Without a key the vault
// refuses to seal (encryption_required); nothing is ever stored in the clear.
//
// The package is internal to the engine in spirit: only the management
// service and delivery open secrets, and no surface ever returns one.
package vault
