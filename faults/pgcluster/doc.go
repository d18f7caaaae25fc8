// Package pgcluster starts a private PostgreSQL cluster for one test, from
// the installed server binaries (SWITCHBOARD_FAULTS_PGBIN, default
// /usr/lib/postgresql/15/bin), in a temporary directory, on a free
// loopback port, with trust authentication: a server the test may restart
// and whose connections it may kill without touching the shared server
// other tests use. PostgreSQL refuses to run as root, so as root the
// cluster runs as the postgres user (runuser).
package pgcluster
