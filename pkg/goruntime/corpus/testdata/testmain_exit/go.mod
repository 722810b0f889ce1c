module example.com/testmain-exit

go 1.26
