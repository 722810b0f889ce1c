module example.com/index-out-of-range

go 1.26
