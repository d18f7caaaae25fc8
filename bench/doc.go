// Package bench holds the benchmarks of Switchboard Notify that need a peer
// baseline (River), in a module of its own so the baseline stays out of the
// main module. See README.md; the workload is in internal/workload and the
// interleaved ratio driver in cmd/emitratio.
package bench
