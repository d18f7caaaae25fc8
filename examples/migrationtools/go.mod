module example.com/migrationtools

go 1.26.0

require (
	github.com/golang-migrate/migrate/v4 v4.20.1
	github.com/jackc/pgx/v5 v5.13.0
	github.com/pressly/goose/v3 v3.30.1
	github.com/stretchr/testify v1.12.1
	github.com/switchboard/notify v0.0.0-00010101000000-000000000000
)

require (
	code.dny.dev/ssrf v0.3.0 // indirect
	github.com/jackc/pgerrcode v0.0.0-20220416144525-469b46aa5efa // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/jonboulle/clockwork v0.5.0 // indirect
	github.com/mfridman/interpolate v0.2.0 // indirect
	github.com/peterldowns/pgtestdb v0.1.1 // indirect
	github.com/sethvargo/go-retry v0.5.0 // indirect
	github.com/thejerf/suture/v4 v4.0.6 // indirect
	github.com/valyala/fastjson v1.6.10 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/text v0.44.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)

replace github.com/switchboard/notify => ../..
