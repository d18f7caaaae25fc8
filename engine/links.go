package engine

import (
	"github.com/switchboard/notify/engine/digest"
	"github.com/switchboard/notify/notifytype"
)

// itemLink is the link of an object a message names (Config.Links.Item),
// "" for none.
func (e *Engine) itemLink(owner notifytype.OwnerScope, kind Resource, id int64) string {
	if e.cfg.Links.Item == nil {
		return ""
	}
	return e.cfg.Links.Item(owner, kind, id)
}

// reportLinks are the links of digest id's report lines: its dead
// letters' todos (Config.Links.Item) and its own page
// (Config.Links.Digest), in the embedder's words (Config.Links.Text).
func (e *Engine) reportLinks(owner notifytype.OwnerScope, id int64) digest.Links {
	return digest.Links{
		Todo:       func(todo int64) string { return e.itemLink(owner, ResourceTodo, todo) },
		Digest:     e.digestLink(owner, id),
		DigestText: e.cfg.Links.Text,
	}
}
