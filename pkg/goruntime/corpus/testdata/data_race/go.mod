module example.com/data-race

go 1.26
