module example.com/exit-code-go-run

go 1.26
