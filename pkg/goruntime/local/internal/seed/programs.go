package seed

import _ "embed" // the seed programs

// The programs built to fill the seed live in _seed (a directory the go
// command ignores, so they are not part of this module's packages). The
// Dockerfile builds the same programs into the runtime image's /cache, so
// a pod and a local sandbox start from the same prebuilt packages: change
// them here and both seeds follow.
const seedMod = "module seed\n\ngo 1.24\n"

var (
	// seedMain imports the standard packages most programs use.
	//go:embed _seed/seed/main.go
	seedMain string
	// seedTest makes go test and go vet compile the testing packages.
	//go:embed _seed/seed/main_test.go
	seedTest string
	// helloMain is what go run of a hello world compiles.
	//go:embed _seed/hello/main.go
	helloMain string
	// raceTest is built with -race (and cgo, which the race detector
	// needs): the race-instrumented runtime, testing and what most tests
	// import. Smaller than seedMain: each race package costs a compile.
	// Local only: the image has neither cgo nor a C compiler.
	//go:embed _seed/race/race_test.go
	raceTest string
)
