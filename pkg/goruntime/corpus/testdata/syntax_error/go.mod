module example.com/syntax-error

go 1.26
