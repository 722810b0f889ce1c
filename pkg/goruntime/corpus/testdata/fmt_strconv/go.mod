module example.com/fmt-strconv

go 1.26
