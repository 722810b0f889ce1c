module example.com/context-timeout

go 1.26
