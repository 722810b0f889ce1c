module example.com/table-subtests

go 1.26
