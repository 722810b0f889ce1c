module example.com/v

go 1.24
