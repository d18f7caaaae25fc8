package actors

import (
	"sync"

	"github.com/switchboard/notify/store"
)

// mailbox is an actor's queue of claimed rows: at most size, in the order
// they were dispatched, taken all at once by the actor's next step. The
// rows live in a slice that grows as they come, so a bound large enough
// for a sink that falls behind costs an idle actor nothing (a buffered
// channel of the same bound kept its whole buffer for every actor alive).
type mailbox struct {
	mu   sync.Mutex
	rows []store.OutboxRow
	size int
	// ready holds a signal while rows may be queued: put gives one, take
	// clears it. A signal found with nothing queued (the rows were taken
	// first) is stale, and take returns none.
	ready chan struct{}
}

func newMailbox(size int) *mailbox {
	return &mailbox{size: size, ready: make(chan struct{}, 1)}
}

// put queues row, unless the mailbox is full.
func (m *mailbox) put(row store.OutboxRow) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.rows) >= m.size {
		return false
	}
	m.rows = append(m.rows, row)
	select {
	case m.ready <- struct{}{}:
	default:
	}
	return true
}

// take empties the mailbox and returns what it held, oldest first.
func (m *mailbox) take() []store.OutboxRow {
	m.mu.Lock()
	defer m.mu.Unlock()
	rows := m.rows
	m.rows = nil
	select {
	case <-m.ready:
	default:
	}
	return rows
}

// len is how many rows are queued.
func (m *mailbox) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.rows)
}
