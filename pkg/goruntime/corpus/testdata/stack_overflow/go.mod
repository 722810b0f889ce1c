module example.com/stack-overflow

go 1.26
