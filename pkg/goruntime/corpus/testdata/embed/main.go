// Files embedded at build time: a string, bytes, and a directory tree.
package main

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"text/template"
)

//go:embed version.txt
var version string

//go:embed static/logo.txt
var logo []byte

//go:embed templates/*.tmpl static
var assets embed.FS

func main() {
	fmt.Println("version:", strings.TrimSpace(version))
	fmt.Print(string(logo))
	err := fs.WalkDir(assets, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fmt.Printf("%s dir=%v\n", path, d.IsDir())
		return nil
	})
	if err != nil {
		panic(err)
	}
	t := template.Must(template.ParseFS(assets, "templates/*.tmpl"))
	data := map[string]any{"Name": "sandbox", "Items": []string{"build", "run", "test"}}
	if err := t.ExecuteTemplate(os.Stdout, "report.tmpl", data); err != nil {
		panic(err)
	}
}
