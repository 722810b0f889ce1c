module example.com/large-output

go 1.26
