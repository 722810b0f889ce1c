module example.com/compile-error

go 1.26
