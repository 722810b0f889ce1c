module example.com/unused-import

go 1.26
