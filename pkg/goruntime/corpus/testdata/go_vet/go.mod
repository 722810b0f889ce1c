module example.com/go-vet

go 1.26
