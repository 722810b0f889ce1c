module example.com/os-args

go 1.26
