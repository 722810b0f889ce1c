module example.com/env-vars

go 1.26
