module example.com/stderr-markdown

go 1.26
