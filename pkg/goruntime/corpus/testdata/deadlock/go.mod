module example.com/deadlock

go 1.26
