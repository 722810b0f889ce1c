module example.com/nil-pointer

go 1.26
