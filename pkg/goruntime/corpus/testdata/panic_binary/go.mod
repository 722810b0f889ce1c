module example.com/panic-binary

go 1.26
