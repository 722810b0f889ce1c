module example.com/mutex-atomic

go 1.26
