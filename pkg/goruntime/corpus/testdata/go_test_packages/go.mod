module example.com/go-test-packages

go 1.26
