// Package benchdb holds what the bench drivers share: a fresh database per
// run, dropped at the end, and the median they report.
package benchdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultAdminURL is the server the drivers use when DATABASE_URL is unset.
const DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Create creates sbbench_<random> on admin's server and returns its URL and
// a function that drops it.
func Create(ctx context.Context, admin string) (string, func() error, error) {
	u, err := url.Parse(admin)
	if err != nil {
		return "", nil, fmt.Errorf("error parsing DATABASE_URL: %w", err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "sbbench_" + hex.EncodeToString(b)

	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("error connecting to %s: %w", u.Redacted(), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		return "", nil, fmt.Errorf("error creating database %s: %w", name, err)
	}
	drop := func() error {
		conn, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			return fmt.Errorf("error connecting to drop %s: %w", name, err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			return fmt.Errorf("error dropping database %s: %w", name, err)
		}
		return nil
	}
	db := *u
	db.Path = "/" + name
	return db.String(), drop, nil
}

// Median returns the median of xs (the mean of the middle two for an even
// count); xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BusyCPU returns the CPU time the whole machine has spent busy (user,
// nice, system, irq, softirq: every process, the database's included)
// since boot, from /proc/stat; ok is false where there is no /proc/stat.
// The difference over a measurement, divided by the work done, is the
// CPU the work cost: a figure that another tenant slowing the machine
// down changes far less than it changes a rate.
func BusyCPU() (d time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, false
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} { // user nice system irq softirq
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100), true // USER_HZ
}
