module example.com/test-build-failed

go 1.26
