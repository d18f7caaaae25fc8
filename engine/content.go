package engine

import "github.com/switchboard/notify/sinks"

// Content is what an event says (Event.Content): its title, place,
// summary, link and the rest, as the embedder gives them. The engine
// cleans it, keeps the body only as an opted-in excerpt, and words it by
// the event's kind (EventKind.Message). It is sinks.Content, named here so
// that an embedder and the surfaces speak the engine's vocabulary.
type Content = sinks.Content

// Draft is a kind's wording of one notification (EventKind.Message): its
// title, lines, details and link, which the engine then finishes by the
// rules that are not the kind's (see EventKind.Message). It is
// sinks.Draft, named here for the same reason as Content.
type Draft = sinks.Draft
