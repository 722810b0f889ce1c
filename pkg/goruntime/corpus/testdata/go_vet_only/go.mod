module example.com/go-vet-only

go 1.26
