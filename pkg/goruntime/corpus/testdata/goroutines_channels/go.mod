module example.com/goroutines-channels

go 1.26
