package engine

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"sync"

	"github.com/switchboard/notify/sinks"
	"github.com/switchboard/notify/store"
)

// renderCacheSlots is how many worded rows the engine keeps; a power of
// two. An event reaches each of its sinks as a row of the same content,
// type, severity and count; its rows are delivered by as many actors,
// some of them behind the others. In a drain of 2,000 events over 10
// sinks each, 256 slots found an event's wording for 66 % of its rows,
// 1,024 for 82 % and 4,096 for over 87 % (90 % at most: one row in ten is its
// event's first).
const renderCacheSlots = 1024

// renderCacheMaxBytes bounds what one slot holds, its content and its
// wording each: a row larger is worded afresh every time, and the cache
// holds a few megabytes at most (typically a row's content is a few
// hundred bytes).
const renderCacheMaxBytes = 2 << 10

// renderCache keeps the messages of the rows last worded by what their
// wording depends on (renderKey), so that an event worded for one of its
// sinks is not worded again for the next: render's cost once an event,
// not once a delivery. It is direct-mapped: a row's key picks one slot,
// which holds the last key that picked it; a wording found there is used
// only when its whole key is the row's.
type renderCache struct {
	seed  maphash.Seed
	mu    sync.Mutex
	slots []renderSlot // a power of two of them
}

// renderKey is everything a row's wording depends on besides the engine's
// own configuration (its declarations, base URL and link text), which do
// not change while it runs.
type renderKey struct {
	payload   []byte
	eventType string
	severity  string
	count     int
	excerpt   bool
}

type renderSlot struct {
	used bool
	key  renderKey
	msg  sinks.Message
}

// newRenderCache returns a cache of n slots, n a power of two.
func newRenderCache(n int) *renderCache {
	return &renderCache{seed: maphash.MakeSeed(), slots: make([]renderSlot, n)}
}

func keyOf(r store.OutboxRow) renderKey {
	return renderKey{payload: r.Payload, eventType: r.EventType, severity: r.Severity, count: r.Count, excerpt: r.IncludeExcerpt}
}

func (k renderKey) equal(o renderKey) bool {
	return k.eventType == o.eventType && k.severity == o.severity && k.count == o.count && k.excerpt == o.excerpt &&
		bytes.Equal(k.payload, o.payload)
}

func (c *renderCache) slot(k renderKey) *renderSlot {
	var h maphash.Hash
	h.SetSeed(c.seed)
	_, _ = h.Write(k.payload)
	_, _ = h.WriteString(k.eventType)
	_ = h.WriteByte(0)
	_, _ = h.WriteString(k.severity)
	var tail [9]byte
	binary.LittleEndian.PutUint64(tail[:8], uint64(k.count))
	if k.excerpt {
		tail[8] = 1
	}
	_, _ = h.Write(tail[:])
	return &c.slots[h.Sum64()&uint64(len(c.slots)-1)]
}

// get returns k's slot, and the wording it keeps for k, if any: a row
// worded afresh is kept in that slot (put) without hashing its key again.
func (c *renderCache) get(k renderKey) (*renderSlot, sinks.Message, bool) {
	s := c.slot(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.used && s.key.equal(k) {
		return s, s.msg, true
	}
	return s, sinks.Message{}, false
}

// put keeps msg as k's wording in s, k's slot (get), in place of what it
// held. The key's content is copied: a row's payload is the row's to
// reuse.
func (c *renderCache) put(s *renderSlot, k renderKey, msg sinks.Message) {
	if len(k.payload) > renderCacheMaxBytes || len(msg.Title)+len(msg.Body)+len(msg.Markdown)+len(msg.Link) > renderCacheMaxBytes {
		return
	}
	k.payload = bytes.Clone(k.payload)
	c.mu.Lock()
	defer c.mu.Unlock()
	*s = renderSlot{used: true, key: k, msg: msg}
}
