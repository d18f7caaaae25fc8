// Package hostid is the reference host's edge between its own tables, which
// key humans and teams by bigint, and the engine, which takes owner and
// actor ids as opaque strings (notifytype.ValidOwnerID). Every conversion
// between the two goes through here: the host writes an int64 out with
// String, Human or Team, and reads one back with Parse.
package hostid

import (
	"strconv"

	"github.com/switchboard/notify/notifytype"
)

// String is the engine's id for the host's human or team id.
func String(id int64) string { return strconv.FormatInt(id, 10) }

// Human is the owner scope of the host's human id.
func Human(id int64) notifytype.OwnerScope { return notifytype.Human(String(id)) }

// Team is the owner scope of the host's team id.
func Team(id int64) notifytype.OwnerScope { return notifytype.Team(String(id)) }

// Parse reads back an id the host gave the engine: a positive integer in
// canonical form (no sign, no leading zero). ok is false for anything else,
// which names no human or team of the host.
func Parse(id string) (n int64, ok bool) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 || String(n) != id {
		return 0, false
	}
	return n, true
}

// Of is the host's id in scope, or ok false when scope is not one of the
// host's (a kind other than want, or an id Parse refuses).
func Of(scope notifytype.OwnerScope, want notifytype.ScopeKind) (n int64, ok bool) {
	if scope.Kind != want {
		return 0, false
	}
	return Parse(scope.ID)
}

// Number is Parse without ok: 0, which names no human or team of the host,
// for an id the host did not issue. The host's surfaces use it to turn the
// acting human of a Principal (always one the host issued) back into the
// key of its own tables.
func Number(id string) int64 {
	n, _ := Parse(id)
	return n
}
