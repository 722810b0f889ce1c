module example.com/multi-package

go 1.26
