package web

// WaitSignInSends waits for the "send me a sign-in link" sends running
// (they run after the answer, so a test waits for them to look at what
// they did).
func WaitSignInSends() { signInSends.wait() }
