module example.com/app

go 1.26

require example.com/mathx v0.0.0

replace example.com/mathx => ./mathx
