module example.com/example-test

go 1.26
