module example.com/signal-kill

go 1.26
