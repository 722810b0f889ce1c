module example.com/missing-module

go 1.26
