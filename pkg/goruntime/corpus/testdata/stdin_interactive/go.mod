module example.com/stdin-interactive

go 1.26
