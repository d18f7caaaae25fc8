// Package store holds every SQL statement of Switchboard Notify and its
// embedded migrations. It speaks pgx only and imports nothing of ours but
// the vocabulary package (notifytype).
//
// Migrations are plain SQL files embedded in the binary and applied in name
// order at start-up, each in its own transaction, under a transaction-level
// advisory lock so that instances starting together apply each file once.
// A landed migration is never edited: a change is a new file.
package store
