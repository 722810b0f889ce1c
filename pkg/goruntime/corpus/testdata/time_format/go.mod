module example.com/time-format

go 1.26
