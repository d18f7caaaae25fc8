package notifytype_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard/notify/notifytype"
)

// Owner ids are opaque strings: a uuid, an integer, a slug, an id with
// colons of its own (the kind is what comes before the first colon).
func TestParseOwnerScopeTakesOpaqueIDs(t *testing.T) {
	for v, want := range map[string]notifytype.OwnerScope{
		"human:7b0c4e2a-1d3f-4c5b-9a8e-2f6d0c1b3a4e": notifytype.Human("7b0c4e2a-1d3f-4c5b-9a8e-2f6d0c1b3a4e"),
		"human:42":               notifytype.Human("42"),
		"team:acme.ops":          notifytype.Team("acme.ops"),
		"team:github:1234":       notifytype.Team("github:1234"),
		"human:ada@example.test": notifytype.Human("ada@example.test"),
		"human:A_b~c-0":          notifytype.Human("A_b~c-0"),
		"human:" + long(128):     notifytype.Human(long(128)),
	} {
		got, err := notifytype.ParseOwnerScope(v)
		if err != nil || got != want {
			t.Errorf("ParseOwnerScope(%q) = %v, %v; want %v", v, got, err, want)
		}
		if got.String() != v {
			t.Errorf("%q round-trips as %q", v, got.String())
		}
	}
}

func TestParseOwnerScopeRefusesBadIDs(t *testing.T) {
	for _, v := range []string{
		"", "human", "human:", "team:", ":42", "robot:42", "Human:42",
		"human:has space", "human:a/b", "human:a#b", "human:émile", "human:a\x00b", "human:a\nb",
		"human:" + long(129),
	} {
		_, err := notifytype.ParseOwnerScope(v)
		var e *notifytype.Error
		if !errors.As(err, &e) || e.Code != notifytype.CodeInvalidArgument || e.Field != "owner_scope" {
			t.Errorf("ParseOwnerScope(%q) = %v; want invalid_argument on owner_scope", v, err)
		}
	}
	var s notifytype.OwnerScope
	if err := s.UnmarshalText([]byte("human:a b")); !errors.Is(err, notifytype.ErrInvalidArgument) || !s.IsZero() {
		t.Errorf("UnmarshalText of a bad id = %v, left %v", err, s)
	}
	if notifytype.Human("").Valid() || notifytype.Team("a b").Valid() || (notifytype.OwnerScope{ID: "1"}).Valid() {
		t.Error("an empty id, a bad id or no kind is not a valid scope")
	}
}

func long(n int) string { return strings.Repeat("x", n) }
