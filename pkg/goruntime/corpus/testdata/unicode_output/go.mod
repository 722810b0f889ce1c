module example.com/unicode-output

go 1.26
