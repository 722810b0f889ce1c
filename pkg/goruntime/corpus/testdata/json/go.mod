module example.com/json

go 1.26
