module example.com/iterators

go 1.26
