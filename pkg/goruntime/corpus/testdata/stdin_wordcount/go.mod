module example.com/stdin-wordcount

go 1.26
