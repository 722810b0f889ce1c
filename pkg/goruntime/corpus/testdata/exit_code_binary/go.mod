module example.com/exit-code-binary

go 1.26
