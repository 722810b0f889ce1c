module example.com/both-streams

go 1.26
