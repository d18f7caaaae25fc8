package apprise_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/switchboard/notify/notifytype"
	"github.com/switchboard/notify/sinks/apprise"
)

// TestCheckSchemesRefusesURLsNewerAppriseSplits: issue 18 item 11. Apprise
// 1.6 and later start a second URL at a scheme of 1 to 12 letters (1.10
// and later 1 to 32), where 1.2 to 1.5 needed 2 to 9; a URL that only the
// newer ones split hid a second service from the old splitter. Every one
// of these is refused with invalid_argument on secret.urls (or
// forbidden_scheme for a scheme off the allowlist), without the secret.
func TestCheckSchemesRefusesURLsNewerAppriseSplits(t *testing.T) {
	t.Parallel()

	// A list that allows every scheme the second URL has, so that only
	// the one-URL rule can refuse them.
	allowed := append([]string{"evolutions", "x", "averyveryverylongschemename", "b"}, apprise.DefaultAllowedSchemes...)
	for _, u := range []string{
		"gotify://h/CANARYtok,evolutions://CANARY.example.net/",
		"gotify://h/CANARYtok,x://CANARY.example.net/",
		"gotify://h/CANARYtok,,x://CANARY.example.net/",
		"gotify://h/CANARYtok,averyveryverylongschemename://CANARY.example.net/",
		"ntfys://CANARYtopic,b://CANARY",
		// No Apprise splits these, but they look like a second URL.
		"gotify://h/CANARYtok,://CANARY.example.net/",
		"gotify://h/CANARYtok,e+x.t-s://CANARY.example.net/",
		"gotify://h/CANARYtok,\u00e9vol://CANARY.example.net/",
		"gotify://h/CANARYtok,aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa://CANARY.example.net/",
	} {
		err := apprise.CheckSchemes([]string{u}, allowed)
		require.ErrorIs(t, err, notifytype.ErrInvalidArgument, "%q", u)
		e, _ := notifytype.AsError(err)
		require.Equal(t, "secret.urls", e.Field, "%q", u)
		require.NotContains(t, err.Error(), "CANARY")
		require.False(t, apprise.OneURL(u), "%q", u)
	}
	// Under the default allowlist a second scheme that is not on it is
	// named as forbidden, whichever Apprise would find it.
	for u, scheme := range map[string]string{
		"gotify://h/CANARYtok,evolutions://CANARY.example.net/": "evolutions",
		"gotify://h/CANARYtok,x://CANARY.example.net/":          "x",
	} {
		err := apprise.CheckSchemes([]string{u}, apprise.DefaultAllowedSchemes)
		require.ErrorIs(t, err, notifytype.ErrForbiddenScheme, "%q", u)
		e, _ := notifytype.AsError(err)
		require.Equal(t, scheme, e.Scheme)
		require.NotContains(t, err.Error(), "CANARY")
	}
	// Each splitter reads the URLs as two, from its own range on.
	require.Len(t, apprise.Splitters[0].Split("gotify://h/tok,evolutions://x"), 1)
	require.Len(t, apprise.SplitURLs("gotify://h/tok,evolutions://x"), 2)
	require.Len(t, apprise.SplitURLs("gotify://h/tok,x://y"), 2)
	require.Len(t, apprise.SplitURLs("gotify://h/tok,"+strings.Repeat("a", 32)+"://y"), 2)
	require.Len(t, apprise.SplitURLs("gotify://h/tok,"+strings.Repeat("a", 33)+"://y"), 1)

	// One URL with commas that start no URL stays allowed.
	for _, u := range []string{
		"mailto://u:p@example.com?to=a@example.com,b@example.com",
		"gotify://gotify.example.net/tok",
		"ntfys://ntfy.example.net/a,b?tags=x,y",
	} {
		require.True(t, apprise.OneURL(u), u)
		require.NoError(t, apprise.CheckSchemes([]string{u}, apprise.DefaultAllowedSchemes), u)
	}
}

// urlText generates strings near the edges of Apprise's splitter: scheme
// letters of every length, separators of every kind, "://" and its pieces,
// and the letters Python folds onto ASCII ones.
func urlText() *rapid.Generator[string] {
	piece := rapid.OneOf(
		rapid.StringMatching(`[a-zA-Z0-9]{0,40}`),
		rapid.SampledFrom([]string{
			"://", ":/", ":", "/", ",", ", ", ",,", " ", "\t", "\n", "\u00a0", "\u2028", "\u3000", "\x1c", "\u0085",
			";", "[", "]", "?", "#", "@", "=", "&", ".", "-", "+", "%2C",
			"\u0130", "\u0131", "\u017f", "\u212a", "\u00e9", "\u200b",
			"gotify", "gotifys", "json", "x", "evolutions", "ntfys", "tgram", "mailto",
		}),
	)
	return rapid.Custom(func(t *rapid.T) string {
		scheme := rapid.SampledFrom([]string{"gotify", "ntfys", "tgram", "mailto", "x", "evolutions", "json"}).Draw(t, "scheme")
		parts := rapid.SliceOfN(piece, 0, 12).Draw(t, "rest")
		return scheme + "://" + strings.Join(parts, "")
	})
}

// TestOneURLAgreesWithRealApprise is the property of issue 18 item 11:
// for generated strings, our verdict that a field holds one URL is never
// looser than the installed Apprise's own parse_urls, nor than Python's re
// engine running Apprise's regex with each newer version's scheme range;
// and the list CheckSchemes accepts reads back as exactly itself.
func TestOneURLAgreesWithRealApprise(t *testing.T) {
	t.Parallel()

	real := startApprise(t)
	allowed := append([]string{"x", "evolutions", "json"}, apprise.DefaultAllowedSchemes...)
	rapid.Check(t, func(t *rapid.T) {
		u := urlText().Draw(t, "url")
		other := rapid.SampledFrom([]string{"ntfys://topic", "x://y", "evolutions://h/p"}).Draw(t, "other")
		trimmed := strings.TrimSpace(u)
		ans := real.split(t, []string{trimmed, trimmed + ", " + other, other + ", " + trimmed})
		splits := [][]string{ans.Own[0]}
		for _, sp := range apprise.Splitters {
			splits = append(splits, ans.ByRange[rangeKey(sp)][0])
		}
		err := apprise.CheckSchemes([]string{u}, allowed)
		for _, got := range splits {
			if len(got) > 1 {
				require.False(t, apprise.OneURL(u), "Apprise reads %q as %q, OneURL says one", u, got)
				require.Error(t, err, "Apprise reads %q as %q, CheckSchemes accepts it", u, got)
			}
		}
		if apprise.OneURL(u) {
			for _, got := range splits {
				require.Equal(t, []string{trimmed}, got, "OneURL(%q)", u)
			}
		}
		if err != nil {
			return
		}
		for _, got := range splits {
			require.Equal(t, []string{trimmed}, got, "accepted %q", u)
		}
		// Accepted, it sits beside another URL without merging or
		// splitting, under every Apprise, as Deliver joins them.
		if apprise.CheckSchemes([]string{u, other}, allowed) == nil {
			require.Equal(t, []string{trimmed, other}, ans.Own[1])
			for _, sp := range apprise.Splitters {
				require.Equal(t, []string{trimmed, other}, ans.ByRange[rangeKey(sp)][1], sp.Versions)
			}
		}
		if apprise.CheckSchemes([]string{other, u}, allowed) == nil {
			require.Equal(t, []string{other, trimmed}, ans.Own[2])
			for _, sp := range apprise.Splitters {
				require.Equal(t, []string{other, trimmed}, ans.ByRange[rangeKey(sp)][2], sp.Versions)
			}
		}
	})
}
