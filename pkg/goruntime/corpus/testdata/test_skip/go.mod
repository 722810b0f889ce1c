module example.com/test-skip

go 1.26
