module example.com/fuzz-seed

go 1.26
