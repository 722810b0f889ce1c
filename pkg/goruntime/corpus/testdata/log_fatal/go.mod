module example.com/log-fatal

go 1.26
