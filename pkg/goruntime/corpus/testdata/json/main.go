// JSON round trip: struct tags, omitempty, nested values, a custom
// marshaler, decoding into a map and reporting a syntax error.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

type Level int

func (l Level) MarshalJSON() ([]byte, error) {
	return json.Marshal(strings.Repeat("*", int(l)))
}

type Task struct {
	ID       int               `json:"id"`
	Title    string            `json:"title"`
	Done     bool              `json:"done"`
	Tags     []string          `json:"tags,omitempty"`
	Priority Level             `json:"priority"`
	Due      time.Time         `json:"due"`
	Meta     map[string]string `json:"meta,omitempty"`
	secret   string
}

func main() {
	tasks := []Task{
		{ID: 1, Title: "write corpus", Tags: []string{"go", "test"}, Priority: 3,
			Due: time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC), secret: "hidden"},
		{ID: 2, Title: "ship <it> & \"more\"", Done: true, Priority: 1,
			Meta: map[string]string{"owner": "lead", "area": "backend"}},
	}
	b, err := json.MarshalIndent(tasks, "", "  ")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(b))

	var back []map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		panic(err)
	}
	fmt.Println(len(back), back[0]["title"], back[1]["done"], back[0]["id"].(float64)+0.5)

	var t Task
	err = json.Unmarshal([]byte(`{"id": 7, "title": "x",}`), &t)
	var se *json.SyntaxError
	fmt.Println("syntax error:", errors.As(err, &se), err)

	dec := json.NewDecoder(strings.NewReader(`{"id":1} {"id":2} {"id":3}`))
	for {
		var v struct{ ID int }
		if err := dec.Decode(&v); err != nil {
			break
		}
		fmt.Print(v.ID, ";")
	}
	fmt.Println()
}
