//go:build race

package rulesandbox

// raceBuild: this binary has the race detector, whose shadow memory a
// worker's RLIMIT_DATA must leave room for (setLimits).
const raceBuild = true
