module example.com/test-only-package

go 1.26
