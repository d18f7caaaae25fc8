package notifytype

import (
	"fmt"
	"strconv"
	"strings"
)

// ScopeKind says whether an owner scope is one human or one team.
type ScopeKind string

const (
	ScopeHuman ScopeKind = "human"
	ScopeTeam  ScopeKind = "team"
)

// OwnerScope is exactly one human or one team (D1). Every sink, connection,
// subscription, digest, queue, webhook, endpoint and event has one. Its
// string form, "human:<id>" or "team:<id>", is what the store keeps.
type OwnerScope struct {
	Kind ScopeKind
	ID   int64
}

// Human returns the owner scope of one human.
func Human(id int64) OwnerScope { return OwnerScope{Kind: ScopeHuman, ID: id} }

// Team returns the owner scope of one team.
func Team(id int64) OwnerScope { return OwnerScope{Kind: ScopeTeam, ID: id} }

// IsZero reports whether the scope is unset.
func (s OwnerScope) IsZero() bool { return s.Kind == "" && s.ID == 0 }

// Valid reports whether the scope names a human or a team with a positive id.
func (s OwnerScope) Valid() bool {
	return (s.Kind == ScopeHuman || s.Kind == ScopeTeam) && s.ID > 0
}

func (s OwnerScope) String() string { return string(s.Kind) + ":" + strconv.FormatInt(s.ID, 10) }

// ParseOwnerScope reads "human:<id>" or "team:<id>".
func ParseOwnerScope(v string) (OwnerScope, error) {
	kind, id, ok := strings.Cut(v, ":")
	n, err := strconv.ParseInt(id, 10, 64)
	s := OwnerScope{Kind: ScopeKind(kind), ID: n}
	if !ok || err != nil || !s.Valid() {
		return OwnerScope{}, InvalidArgument("owner_scope", fmt.Sprintf("%q is not human:<id> or team:<id>", v))
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
