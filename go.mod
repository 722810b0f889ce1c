module github.com/go-runtime-sandbox/go-runtime-sandbox

go 1.26.8

require (
	github.com/modelcontextprotocol/go-sdk v1.8.0 // indirect
	sigs.k8s.io/agent-sandbox v0.5.6 // indirect
)
