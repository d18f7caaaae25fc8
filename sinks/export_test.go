package sinks

// CleanRunesForTest is Clean without its fast path for text that is
// already clean, so a test can check that the two agree.
var CleanRunesForTest = cleanRunes
