module example.com/failing-test-verbose

go 1.26
