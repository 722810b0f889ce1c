package local_test

import (
	"context"
	"fmt"
	"log"

	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime"
	"github.com/go-runtime-sandbox/go-runtime-sandbox/pkg/goruntime/local"
)

// A program that opens local sandboxes calls local.ServeIfChild first thing
// in main, opens a session, and runs code in it.
func Example() {
	// In main: local.ServeIfChild() — the sandbox's runtime server is this
	// same binary, re-executed inside bubblewrap.
	ctx := context.Background()
	backend, err := local.New(local.Options{})
	if err != nil {
		log.Fatal(err) // wraps goruntime.ErrUnavailable when bwrap is missing
	}
	sess, err := goruntime.Open(ctx, backend, goruntime.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close(ctx)

	res, err := sess.Execute(ctx, goruntime.Request{
		Files: []goruntime.File{
			{Path: "go.mod", Data: []byte("module hello\n\ngo 1.26\n")},
			{Path: "main.go", Data: []byte(`package main

import "fmt"

func main() { fmt.Println("hello from the sandbox") }
`)},
		},
		Command: "go run .",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(res.Outcome, " ", res.ExitCode, " ", res.Stdout)
}
