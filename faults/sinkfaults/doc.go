// Package sinkfaults is scenario 3 of the reliability suite: sinks that
// time out, reset connections, answer slowly, fail then recover, redirect,
// ask to be retried later (429/503 with Retry-After) or panic in their
// adapter (planted through testhooks.WrapAdapters). Each runs through a
// serving engine on a fake clock against an httptest server, and must end
// in the right error class (abandoned for a panic, D25) on the D10
// schedule, moved by Retry-After only as D24 allows (up to the next slot,
// the last attempt not at all), never past 7 attempts.
package sinkfaults
