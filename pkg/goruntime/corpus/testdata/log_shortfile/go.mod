module example.com/log-shortfile

go 1.26
