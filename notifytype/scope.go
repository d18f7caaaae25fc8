package notifytype

import (
	"fmt"
	"strings"
)

// ScopeKind says whether an owner scope is one human or one team.
type ScopeKind string

const (
	ScopeHuman ScopeKind = "human"
	ScopeTeam  ScopeKind = "team"
)

// MaxOwnerIDLen is the longest owner id, in bytes.
const MaxOwnerIDLen = 128

// OwnerScope is exactly one human or one team (D1). Every sink, connection,
// subscription, digest, queue, webhook, endpoint and event has one. Its
// string form, "human:<id>" or "team:<id>", is what the store keeps.
//
// ID is the host's own id of that human or team, opaque to the engine: a
// uuid, an integer, a slug. It is 1 to 128 bytes (MaxOwnerIDLen) of ASCII
// letters, digits and . _ ~ : @ - (so "7b0c4e2a-…", "42", "acme.ops" and
// "github:1234" are ids). The kind is everything before the first colon, so
// an id may itself hold colons. Ids compare byte for byte: "42" and "042"
// are two owners. The schema's domain switchboard.owner_scope holds the same
// rule, so a bad id is refused by the database as well as by ParseOwnerScope.
type OwnerScope struct {
	Kind ScopeKind
	ID   string
}

// Human returns the owner scope of one human with the host's id for them.
func Human(id string) OwnerScope { return OwnerScope{Kind: ScopeHuman, ID: id} }

// Team returns the owner scope of one team with the host's id for it.
func Team(id string) OwnerScope { return OwnerScope{Kind: ScopeTeam, ID: id} }

// IsZero reports whether the scope is unset.
func (s OwnerScope) IsZero() bool { return s.Kind == "" && s.ID == "" }

// Valid reports whether the scope names a human or a team with a valid id
// (ValidOwnerID).
func (s OwnerScope) Valid() bool {
	return (s.Kind == ScopeHuman || s.Kind == ScopeTeam) && ValidOwnerID(s.ID)
}

// ValidOwnerID reports whether id is an owner id: 1 to MaxOwnerIDLen bytes
// of A-Z a-z 0-9 . _ ~ : @ -. A human acting (a Principal's human) is named
// by the same kind of id.
func ValidOwnerID(id string) bool {
	if len(id) == 0 || len(id) > MaxOwnerIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '_', c == '~', c == ':', c == '@', c == '-':
		default:
			return false
		}
	}
	return true
}

func (s OwnerScope) String() string { return string(s.Kind) + ":" + s.ID }

// ParseOwnerScope reads "human:<id>" or "team:<id>": the kind is what comes
// before the first colon, the id (ValidOwnerID) all that follows. Anything
// else is invalid_argument naming owner_scope.
func ParseOwnerScope(v string) (OwnerScope, error) {
	kind, id, ok := strings.Cut(v, ":")
	s := OwnerScope{Kind: ScopeKind(kind), ID: id}
	if !ok || !s.Valid() {
		if len(v) > MaxOwnerIDLen+8 {
			v = v[:MaxOwnerIDLen+8] + "…"
		}
		return OwnerScope{}, InvalidArgument("owner_scope", fmt.Sprintf("%q is not human:<id> or team:<id> (an id is 1 to %d of A-Z a-z 0-9 . _ ~ : @ -)", v, MaxOwnerIDLen))
	}
	return s, nil
}

// MarshalText implements encoding.TextMarshaler.
func (s OwnerScope) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *OwnerScope) UnmarshalText(b []byte) error {
	v, err := ParseOwnerScope(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
