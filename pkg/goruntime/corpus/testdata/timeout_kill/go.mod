module example.com/timeout-kill

go 1.26
