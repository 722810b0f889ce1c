module example.com/r

go 1.24
