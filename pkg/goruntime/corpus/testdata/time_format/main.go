// Time formatting with fixed instants (no wall clock): layouts, zones,
// durations, arithmetic and parsing.
package main

import (
	"fmt"
	"time"
)

func main() {
	t := time.Date(2024, time.February, 29, 13, 4, 5, 123456789, time.UTC)
	layouts := []string{
		time.RFC3339, time.RFC3339Nano, time.RFC1123, time.Kitchen, time.ANSIC,
		time.DateTime, time.DateOnly, "2006-01-02T15:04:05.000Z07:00", "Mon Jan _2 3PM", "02/01/06",
	}
	for _, l := range layouts {
		fmt.Printf("%-36q %s\n", l, t.Format(l))
	}
	east := time.FixedZone("UTC+5:30", 5*3600+1800)
	fmt.Println(t.In(east))
	fmt.Println(t.Unix(), t.UnixMilli(), t.YearDay(), t.Weekday())
	fmt.Println(t.AddDate(1, 0, 0).Format(time.DateOnly))
	fmt.Println(t.Add(36*time.Hour + 90*time.Second).Format(time.RFC3339))
	for _, d := range []time.Duration{1500 * time.Millisecond, 90 * time.Minute, 42 * time.Microsecond, 0} {
		fmt.Print(d, " ")
	}
	fmt.Println()
	p, err := time.Parse(time.RFC3339, "2023-11-05T01:30:00-07:00")
	fmt.Println(p.UTC(), err)
	_, err = time.Parse(time.DateOnly, "2023-13-01")
	fmt.Println(err)
	fmt.Println(time.Unix(0, 0).UTC().Format(time.RFC822Z))
	fmt.Println(t.Truncate(time.Hour).Format(time.TimeOnly), t.Round(time.Second).Nanosecond())
}
