module example.com/benchmark

go 1.26
