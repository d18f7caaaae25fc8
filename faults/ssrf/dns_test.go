package ssrf_test

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"sync"
)

// fakeDNS answers A queries from a table; a name may have a sequence of
// answers (rebinding), the last repeated. Unknown names are NXDOMAIN;
// AAAA queries get no records.
type fakeDNS struct {
	conn    net.PacketConn
	mu      sync.Mutex
	answers map[string][]netip.Addr
	asked   map[string]int
}

func startFakeDNS(answers map[string][]netip.Addr) (*fakeDNS, error) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &fakeDNS{conn: conn, answers: answers, asked: map[string]int{}}
	go d.serve()
	return d, nil
}

// resolver is a Go resolver that asks only this server.
func (d *fakeDNS) resolver() *net.Resolver {
	addr := d.conn.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dialer net.Dialer
		return dialer.DialContext(ctx, "udp", addr)
	}}
}

func (d *fakeDNS) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := d.answer(buf[:n]); resp != nil {
			_, _ = d.conn.WriteTo(resp, from)
		}
	}
}

// answer builds the response to one query (RFC 1035 §4.1), or nil for a
// packet it cannot read.
func (d *fakeDNS) answer(q []byte) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	var labels []string
	i := 12
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if i+1+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	if i+5 > len(q) {
		return nil
	}
	question := q[12 : i+5]
	qtype := binary.BigEndian.Uint16(q[i+1 : i+3])
	name := strings.ToLower(strings.Join(labels, "."))

	d.mu.Lock()
	seq, known := d.answers[name]
	var addr netip.Addr
	if known && qtype == 1 {
		k := d.asked[name]
		d.asked[name]++
		addr = seq[min(k, len(seq)-1)]
	}
	d.mu.Unlock()

	resp := make([]byte, 12, 64)
	copy(resp, q[:2])
	flags := uint16(0x8180) // response, recursion desired and available
	if !known {
		flags |= 3 // NXDOMAIN
	}
	binary.BigEndian.PutUint16(resp[2:], flags)
	binary.BigEndian.PutUint16(resp[4:], 1)
	if addr.IsValid() {
		binary.BigEndian.PutUint16(resp[6:], 1)
	}
	resp = append(resp, question...)
	if addr.IsValid() {
		a := addr.As4()
		resp = append(resp, 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4)
		resp = append(resp, a[:]...)
	}
	return resp
}
