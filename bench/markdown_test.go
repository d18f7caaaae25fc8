package bench_test

import (
	"testing"

	"github.com/switchboard/notify/sinks"
)

// BenchmarkMarkdownEscape escapes what a dead letter's message carries:
// text with nothing to escape (most titles and places), and text with
// some. Every message's fields pass through it (sinks.Finish), and its
// secret's parts did, four times a message, until session 13.
func BenchmarkMarkdownEscape(b *testing.B) {
	for _, tc := range []struct{ name, s string }{
		{"plain", "Nightly build failed on main after the third retry of the deploy step"},
		{"marked", "fix(ci): retry `make test` on *flaky* runners [#1817] <ops> & friends"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = sinks.MarkdownEscape(tc.s)
			}
		})
	}
}
