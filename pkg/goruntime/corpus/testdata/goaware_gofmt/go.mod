module example.com/f

go 1.24
