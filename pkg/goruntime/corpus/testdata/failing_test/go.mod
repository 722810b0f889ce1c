module example.com/failing-test

go 1.26
