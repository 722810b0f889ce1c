module example.com/test-panics

go 1.26
