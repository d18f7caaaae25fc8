package engine

import "github.com/switchboard/notify/sinks"

// CleanTitle is sender-written text (a todo's title, an event's Title) as
// a message shows it: control characters stripped, on one line, cut to
// sinks.TitleMaxRunes. A surface that shows such text beside the
// engine's messages (a digest's preview) shows it the same way.
func CleanTitle(s string) string { return sinks.Clean(s, sinks.TitleMaxRunes) }
